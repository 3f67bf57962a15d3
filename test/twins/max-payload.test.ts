import { describe, expect } from "vitest";
import { derrickTest } from "../harness/fixture.ts";
import { expectProblem } from "../harness/json.ts";
import { putTwin, twinState } from "./helpers.ts";

// An external nats-server with its default max_payload (1 MB), not the embedded server's 8 MB.
const it = derrickTest({ actors: ["identity", "twins"], nats: { extraConfig: "max_payload: 1MB" } });

describe("twin properties on a server with max_payload 1 MB", () => {
  it("twins - a PUT within the documented limits whose commit record would not fit in one NATS message is 413 problem+json naming the body, and nothing is written", async ({
    derrick,
    nc,
  }) => {
    expect(nc.info?.max_payload).toBe(1024 * 1024);
    // 1000 names of 128 bytes and 820 KB of values: each limit kept, the record (names twice) over 1 MB.
    const twins = Array.from({ length: 1000 }, (_, i) => ({ name: `n${i}`.padEnd(128, "x"), value: "v".repeat(820) }));
    const problem = await expectProblem(await putTwin(derrick, "dev-big", { group: "big", twins }), 413);
    expect(problem.detail).toMatch(/^\/body: .*max_payload/);
    expect((await twinState(derrick, "dev-big", "big")).desired).toEqual({});
    expect((await putTwin(derrick, "dev-big", { group: "big", twins: twins.slice(0, 500) })).status).toBe(200);
  });
});
