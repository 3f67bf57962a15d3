export { startTestNats, type TestNats } from "./nats.ts";
export { startTestRedis, freePort, type TestRedis } from "./redis.ts";
export { clientToken, startDerrick, TEST_CLIENTS, testClient, type TestDerrick, type TestClient } from "./derrick.ts";
export { eventually } from "./poll.ts";
export { endKvWatches } from "./watches.ts";
export { startSlowLink, type SlowLink } from "./slow-link.ts";
export { openBucket } from "./kv.ts";
