#!/usr/bin/env node
// A local webhook receiver for trying derrick's notifications (README quickstart): listens on
// 127.0.0.1:<port>, checks each POST's Standard Webhooks signature with the subscription's secret
// (WEBHOOK_SECRET, `whsec_…`) and prints one line per delivery. Answers 204, or 401 when the
// signature does not verify.
import { createServer } from "node:http";
import { Webhook } from "standardwebhooks";

const port = Number(process.argv[2] ?? 9000);
const secret = process.env.WEBHOOK_SECRET;
if (!secret) {
  console.error("set WEBHOOK_SECRET to the subscription's secret (GET …/subscriptions/{id}/secret)");
  process.exit(2);
}
// The library takes the key without its prefix.
const webhook = new Webhook(secret.replace(/^whsec_/, ""));

createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const body = Buffer.concat(chunks).toString("utf8");
    try {
      const event = webhook.verify(body, req.headers);
      console.log(`verified ${req.headers["webhook-id"]} ${event.type ?? ""} ${JSON.stringify(event.data ?? event)}`);
      res.writeHead(204).end();
    } catch (error) {
      console.log(`NOT verified ${req.headers["webhook-id"]}: ${error.message}`);
      res.writeHead(401).end();
    }
  });
}).listen(port, "127.0.0.1", () => console.log(`listening on http://127.0.0.1:${port}/`));
