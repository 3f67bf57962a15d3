/**
 * The delivery bench's event source: a separate process that publishes events to JetStream, as the
 * services that emit events do in a deployment (they never share the deliverer's process or event
 * loop). Reads one command per stdin line, `<phase> <count> <inFlight>`, publishes `count` events on
 * the subject given as argument with at most `inFlight` unacknowledged, then prints
 * `{"published": n, "seconds": s}`. Each event carries its phase and publish time (`data.p`, `data.t`).
 */
import { jetstream } from "@nats-io/jetstream";
import { connectNats } from "../../platform/nats.ts";

const [natsUrl, subject] = process.argv.slice(2);
const nc = await connectNats(natsUrl!, "bench-event-publisher");
const js = jetstream(nc);
console.log(JSON.stringify({ ready: true }));

async function publish(phase: string, count: number, limit: number): Promise<void> {
  const started = performance.now();
  const inFlight = new Set<Promise<unknown>>();
  for (let i = 0; i < count; i++) {
    const p = js.publish(subject!, JSON.stringify({ data: { p: phase, n: i, t: Date.now() } })).finally(() => inFlight.delete(p));
    inFlight.add(p);
    if (inFlight.size >= limit) await Promise.race(inFlight);
  }
  await Promise.all(inFlight);
  console.log(JSON.stringify({ published: count, seconds: (performance.now() - started) / 1000 }));
}

let buffered = "";
for await (const chunk of Bun.stdin.stream()) {
  buffered += new TextDecoder().decode(chunk);
  let newline: number;
  while ((newline = buffered.indexOf("\n")) >= 0) {
    const [phase, count, limit] = buffered.slice(0, newline).trim().split(" ");
    buffered = buffered.slice(newline + 1);
    await publish(phase!, Number(count), Number(limit));
  }
}
await nc.drain();
