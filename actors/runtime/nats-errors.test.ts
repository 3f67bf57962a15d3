import { describe, expect, it } from "vitest";
import { NoRespondersError, RequestError, TimeoutError } from "@nats-io/nats-core";
import { JetStreamApiError } from "@nats-io/jetstream";
import { DerrickError } from "../../subjects/index.ts";
import { retryTransient, transientNatsProblem } from "./nats-errors.ts";

describe("transientNatsProblem", () => {
  it("nats errors - a publish no stream answered (how nats.js reports it after a server loss) is a 503 with Retry-After", () => {
    const noResponders = new RequestError("no responders: 'derrick.events.opendes.PlanShared'", {
      cause: new NoRespondersError("derrick.events.opendes.PlanShared"),
    });
    // nats.js wraps it in JetStreamNotEnabled, which it does not export: a plain Error with the cause.
    const problem = transientNatsProblem(new Error("jetstream is not enabled", { cause: noResponders }));
    expect(problem?.status).toBe(503);
    expect(problem?.headers).toMatchObject({ "Retry-After": "1" });
  });

  it("nats errors - a JetStream timeout is a 504 (outcome unknown), JetStream's own 503 a 503", () => {
    expect(transientNatsProblem(new TimeoutError())?.status).toBe(504);
    const apiError = new JetStreamApiError({ code: 503, err_code: 10008, description: "JetStream system temporarily unavailable" });
    expect(transientNatsProblem(apiError)?.status).toBe(503);
  });

  it("nats errors - anything else, and a problem a handler chose, is left as it is", () => {
    expect(transientNatsProblem(new Error("boom"))).toBeUndefined();
    expect(
      transientNatsProblem(new JetStreamApiError({ code: 400, err_code: 10058, description: "stream name already in use" })),
    ).toBeUndefined();
    expect(transientNatsProblem(new DerrickError(409, "kept changing", { cause: new TimeoutError() }))).toBeUndefined();
  });
});

describe("retryTransient", () => {
  it("start - a start that times out is tried again after each delay until it succeeds; any other failure at once", async () => {
    const waits: number[] = [];
    let calls = 0;
    const flaky = async () => {
      if (++calls < 3) throw new TimeoutError();
      return "started";
    };
    expect(await retryTransient(flaky, (_e, ms) => waits.push(ms), [1, 2, 3])).toBe("started");
    expect([calls, waits]).toEqual([3, [1, 2]]);

    const broken = new Error("bad config");
    await expect(
      retryTransient(
        async () => Promise.reject(broken),
        () => waits.push(-1),
        [1],
      ),
    ).rejects.toBe(broken);
    expect(waits).toEqual([1, 2]);
  });

  it("start - a passing failure past the last delay is thrown", async () => {
    let calls = 0;
    const never = async () => {
      calls++;
      throw new TimeoutError();
    };
    await expect(retryTransient(never, () => undefined, [1, 1])).rejects.toBeInstanceOf(TimeoutError);
    expect(calls).toBe(3);
  });
});
