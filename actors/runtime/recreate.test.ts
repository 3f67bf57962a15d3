import { describe, expect, it } from "vitest";
import { JetStreamApiCodes, JetStreamApiError, type JetStreamManager } from "@nats-io/jetstream";
import type { Kvm } from "@nats-io/kv";
import { recreatingBucket } from "./recreate.ts";

const streamNotFound = () =>
  new JetStreamApiError({ code: 404, err_code: JetStreamApiCodes.StreamNotFound, description: "stream not found" });

/** A JetStreamManager whose stream lookups answer, in turn, from `answers` ("gone" or "there"), then "there". */
function jsmAnswering(answers: Array<"gone" | "there">) {
  let lookups = 0;
  const jsm = {
    streams: {
      info: async () => {
        const answer = answers[lookups++] ?? "there";
        if (answer === "gone") throw streamNotFound();
        return { config: {} };
      },
    },
  } as unknown as JetStreamManager;
  return { jsm, lookups: () => lookups };
}

/**
 * Runs through the guard an operation whose first call is never answered (a direct get sent to a
 * deleted stream waits for its 5 s timeout) and whose next call answers "value".
 */
async function guardUnansweredOnce(answers: Array<"gone" | "there">) {
  const { jsm, lookups } = jsmAnswering(answers);
  let created = 0;
  const kvm = { create: async () => void created++ } as unknown as Kvm;
  const bucket = recreatingBucket(jsm, kvm, "b", {});
  let calls = 0;
  const op = () => (++calls === 1 ? new Promise<string>(() => undefined) : Promise.resolve("value"));
  await expect(bucket.guard(op)).resolves.toBe("value");
  return { calls, lookups: lookups(), created };
}

describe("recreatingBucket's guard", () => {
  it("recreate - a read left unanswered on a bucket another process makes again meanwhile is tried again there, not failed with the probe's own error", async () => {
    // The probe finds the stream gone; by the guard's own lookup another process (which saw the
    // advisory) has made it again: the operation is to be run again, not thrown as "gone".
    expect(await guardUnansweredOnce(["gone", "there"])).toEqual({ calls: 2, lookups: 2, created: 0 });
  });

  it("recreate - a read left unanswered on a bucket still missing makes it again and is tried once more", async () => {
    expect(await guardUnansweredOnce(["gone", "gone"])).toMatchObject({ calls: 2, created: 1 });
  });
});
