import { describe, expect, it } from "vitest";
import { NoRespondersError, RequestError, TimeoutError } from "@nats-io/nats-core";
import { JetStreamApiError } from "@nats-io/jetstream";
import { DerrickError } from "../../subjects/index.ts";
import { transientNatsProblem } from "./nats-errors.ts";

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
