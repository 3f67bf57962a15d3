/**
 * Worker: computes aggregation jobs (jobs.ts) off the reporting actor's thread, so a task of seconds does not hold the
 * event loop the edge and every other actor of the process share (docs/reporting.md#large-aggregations-answer-202-with-a-task).
 *
 * In: a ComputeRequest → a ComputeReply with the result's JSON bytes (transferred), or the error a 200 would have answered.
 */
import { toDerrickError } from "../../subjects/index.ts";
import { encodeJson } from "../runtime/kv.ts";
import { computeJob, type AggregationJob } from "./jobs.ts";

declare const self: Worker;

export type ComputeRequest = { id: number; job: AggregationJob };
export type ComputeReply =
  | { id: number; bytes: Uint8Array }
  | { id: number; error: { status: number; detail: string; type: string; extensions: Record<string, unknown> } };

self.onmessage = (event: MessageEvent<ComputeRequest>) => {
  const { id, job } = event.data;
  try {
    const bytes = encodeJson(computeJob(job));
    postMessage({ id, bytes } satisfies ComputeReply, [bytes.buffer as ArrayBuffer]);
  } catch (error) {
    const problem = toDerrickError(error);
    postMessage({
      id,
      error: { status: problem.status, detail: problem.detail, type: problem.type, extensions: problem.extensions },
    } satisfies ComputeReply);
  }
};
