import { clientToken, startDerrick, startTestNats, testClient } from "./test/harness/index.ts";
import { seedDemo } from "./actors/reporting/index.ts";
import { httpLoad } from "./bench/load.ts";
const CLIENT = testClient("bench", ["users.datalake.admins","users.datalake.editors","users.data.root","twins.writers","projects.admins","assessments.editors","notifications.publishers"]);
const nats = await startTestNats();
const derrick = await startDerrick(nats, { env: { DERRICK_CLIENTS: JSON.stringify([CLIENT]), DERRICK_LOG_LEVEL: "warn" } });
const headers = { authorization: `Bearer ${await clientToken(derrick.url, CLIENT)}`, appkey: CLIENT.appkey, "slb-partition-id": "opendes", "data-partition-id": "opendes" };
await seedDemo(derrick.bus, "opendes");
if (process.env.SETUP) { const [p, b] = process.env.SETUP.split(" ", 2); const r = await fetch(`${derrick.url}${p}`, { method: "PUT", headers: { ...headers, "content-type": "application/json" }, body: b }); console.log("setup", r.status); }
const path = process.env.ROUTE!;
const body = process.env.BODY;
const r0 = await fetch(`${derrick.url}${path}`, { method: body ? "POST" : "GET", headers: { ...headers, "content-type": "application/json" }, body });
console.log(r0.status, (await r0.arrayBuffer()).byteLength, "bytes");
const r = await httpLoad(path, `${derrick.url}${path}`, body ?? "", { connections: 32, seconds: Number(process.env.SECS ?? 6), headers, method: body ? "POST" : "GET" });
console.log(r.opsPerSec.toFixed(0), "req/s");
await derrick.cleanup(); await nats.stop();
