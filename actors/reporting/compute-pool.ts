/**
 * The reporting actor's side of the compute worker (compute-worker.ts): one worker thread, started on the first job,
 * jobs answered in the order they finish. A worker that crashes fails the jobs it held and is started again for the next.
 */
import { DerrickError } from "../../subjects/index.ts";
import type { ComputeReply, ComputeRequest } from "./compute-worker.ts";
import type { AggregationJob } from "./jobs.ts";

type Pending = { resolve: (bytes: Uint8Array) => void; reject: (error: Error) => void };

export class ComputePool {
  private worker: Worker | undefined;
  private readonly pending = new Map<number, Pending>();
  private nextId = 0;

  constructor(private readonly module = new URL("./compute-worker.ts", import.meta.url)) {}

  /** The job's result as the JSON bytes a 200 answers; rejects with the DerrickError it would have answered. */
  run(job: AggregationJob): Promise<Uint8Array> {
    const worker = this.started();
    const id = this.nextId++;
    return new Promise<Uint8Array>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      worker.postMessage({ id, job } satisfies ComputeRequest);
    });
  }

  /** Jobs running or waiting in the worker. */
  get size(): number {
    return this.pending.size;
  }

  stop(): void {
    this.worker?.terminate();
    this.failAll("the reporting actor stopped");
  }

  private started(): Worker {
    if (this.worker) return this.worker;
    const worker = new Worker(this.module);
    worker.onmessage = (event: MessageEvent<ComputeReply>) => {
      const reply = event.data;
      const waiting = this.pending.get(reply.id);
      if (!waiting) return;
      this.pending.delete(reply.id);
      if ("bytes" in reply) waiting.resolve(reply.bytes);
      else
        waiting.reject(
          new DerrickError(reply.error.status, reply.error.detail, { type: reply.error.type, extensions: reply.error.extensions }),
        );
    };
    const lost = (why: string) => {
      if (this.worker !== worker) return;
      this.worker = undefined;
      worker.terminate();
      this.failAll(why);
    };
    worker.onerror = (event) => lost(`the aggregation worker failed: ${event.message || "no message"}`);
    worker.addEventListener("close", () => lost("the aggregation worker exited"));
    this.worker = worker;
    return worker;
  }

  private failAll(why: string): void {
    for (const waiting of this.pending.values()) waiting.reject(new Error(why));
    this.pending.clear();
  }
}
