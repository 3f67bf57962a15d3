// Peer: Moleculer with moleculer-web as the HTTP gateway and its NATS transporter between the
// gateway broker and the echo service broker (two nodes, so every call crosses NATS, as in derrick).
const { ServiceBroker } = require("moleculer");
const ApiGateway = require("moleculer-web");

const [natsUrl, port] = [process.argv[2], Number(process.argv[3])];
const common = { transporter: { type: "NATS", options: { url: natsUrl } }, logger: false, namespace: "bench" };

async function main() {
  const worker = new ServiceBroker({ ...common, nodeID: "echo-node" });
  worker.createService({ name: "echo", actions: { echo: (ctx) => ctx.params } });
  const gateway = new ServiceBroker({ ...common, nodeID: "gateway-node" });
  gateway.createService({
    name: "api",
    mixins: [ApiGateway],
    settings: {
      port,
      ip: "127.0.0.1",
      logRequest: null,
      logResponse: null,
      routes: [{ path: "/v1/system", aliases: { "POST echo": "echo.echo" }, bodyParsers: { json: true }, logging: false }],
    },
  });
  await worker.start();
  await gateway.start();
  await gateway.waitForServices(["echo"]);
  console.log(JSON.stringify({ ready: true, port }));
  const stop = async () => {
    await gateway.stop();
    await worker.stop();
    process.exit(0);
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
}
main().catch((error) => {
  console.error(error);
  process.exit(1);
});
