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

describe("recreatingBucket's guard", () => {
  it("recreate - a read left unanswered on a bucket another process makes again meanwhile is tried again there, not failed with the probe's own error", async () => {
    // The probe finds the stream gone; by the guard's own lookup another process (which saw the
    // advisory) has made it again: the operation is to be run again, not thrown as "gone".
    const { jsm, lookups } = jsmAnswering(["gone", "there"]);
    let created = 0;
    const kvm = { create: async () => void created++ } as unknown as Kvm;
    const bucket = recreatingBucket(jsm, kvm, "b", {});
    let calls = 0;
    // The first call is a direct get sent to the deleted stream: never answered (until its 5 s timeout).
    const op = () => (++calls === 1 ? new Promise<string>(() => undefined) : Promise.resolve("value"));
    await expect(bucket.guard(op)).resolves.toBe("value");
    expect(calls).toBe(2);
    expect(lookups()).toBe(2);
    expect(created).toBe(0);
  });

  it("recreate - a read left unanswered on a bucket still missing makes it again and is tried once more", async () => {
    const { jsm } = jsmAnswering(["gone", "gone"]);
    let created = 0;
    const kvm = { create: async () => void created++ } as unknown as Kvm;
    const bucket = recreatingBucket(jsm, kvm, "b", {});
    let calls = 0;
    const op = () => (++calls === 1 ? new Promise<string>(() => undefined) : Promise.resolve("value"));
    await expect(bucket.guard(op)).resolves.toBe("value");
    expect(created).toBe(1);
    expect(calls).toBe(2);
  });
});
