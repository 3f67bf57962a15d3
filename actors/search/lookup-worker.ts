/**
 * The actor's side of the lookup writer worker (index-builder.ts): posts batches in order, counts
 * those not yet written (backpressure), and turns the worker's replies into promises. A failure —
 * reported by the worker or the worker dying — is kept in `failure`; after it nothing more is written.
 */
import type { LookupBatch } from "./lookup.ts";
import type { BuilderReply, BuilderRequest } from "./index-builder.ts";

type Failure = { ok: false; phase: "open" | "batch" | "finish" | "worker"; message: string };
export type FinishOutcome = { ok: true } | Failure;

export class LookupWorker {
  failure: string | undefined;
  private failedIn: Failure = { ok: false, phase: "worker", message: "" };
  /** Batches posted and not yet written. */
  private queued = 0;
  private drained: Array<() => void> = [];
  private lowWater = 0;
  /** The reply awaited by open/finish/stop, if any. */
  private awaiting: ((outcome: FinishOutcome) => void) | undefined;

  private constructor(private readonly worker: Worker) {
    worker.onmessage = (event: MessageEvent<BuilderReply>) => this.receive(event.data);
    worker.onerror = (event) => this.fail("worker", event.message || "the lookup writer worker crashed");
    // A worker that ends without an error (or after one) settles whatever waits on it.
    worker.addEventListener("close", () => this.fail("worker", "the lookup writer worker exited"));
  }

  /** A worker with the lookup file open, or why there is none. */
  /** `paths`: the field path ids the index has now (the worker learns new ones with each batch). */
  static async start(module: URL, file: string, paths: Array<[string, number]>): Promise<LookupWorker | string> {
    let worker: Worker;
    try {
      worker = new Worker(module);
    } catch (error) {
      return String(error);
    }
    const handle = new LookupWorker(worker);
    const outcome = await handle.request({ type: "open", file, paths });
    if (outcome.ok) return handle;
    worker.terminate();
    return outcome.message;
  }

  /** `parts`: the JSON of the batch's LookupParts; `newPaths`: ids given to field paths since the last batch. */
  write(batch: LookupBatch, newPaths: Array<[string, number]>, parts: string): void {
    if (this.failure !== undefined) return;
    this.queued++;
    // The parts as one JSON string: structured clone of their arrays cost the actor's thread several
    // times more and left the worker's heap holding every string of the load (RSS 2.7 GB at 200k records).
    this.worker.postMessage({
      type: "batch",
      seq: batch.seq,
      rids: batch.rids,
      partOf: batch.partOf,
      newPaths,
      paths: batch.paths,
      parts,
    } satisfies BuilderRequest);
  }

  /** Undefined while at most `max` batches wait; else settles once at most half of them do (or it failed). */
  backpressure(max: number): Promise<void> | undefined {
    if (this.queued <= max || this.failure !== undefined) return undefined;
    this.lowWater = Math.floor(max / 2);
    return new Promise((resolve) => this.drained.push(resolve));
  }

  /** Writes what it was given, runs `sql` (the indexes), closes its connection and ends. */
  async finish(sql: string): Promise<FinishOutcome> {
    const outcome = this.failure !== undefined ? this.failedIn : await this.request({ type: "finish", sql });
    this.worker.terminate();
    return outcome;
  }

  /** Writes what it was given, closes its connection and ends. */
  async stop(): Promise<void> {
    if (this.failure === undefined) await this.request({ type: "stop" });
    this.worker.terminate();
  }

  /** Ends it at once (the process is closing the index): a load cut short is rebuilt on the next open. */
  terminate(): void {
    this.worker.terminate();
    this.fail("worker", "terminated");
  }

  private request(message: BuilderRequest): Promise<FinishOutcome> {
    return new Promise((resolve) => {
      this.awaiting = resolve;
      this.worker.postMessage(message);
    });
  }

  private receive(reply: BuilderReply): void {
    switch (reply.type) {
      case "applied":
        this.queued--;
        if (this.queued <= this.lowWater) this.release();
        return;
      case "failed":
        this.fail(reply.phase, reply.message);
        return;
      default:
        this.settle({ ok: true });
    }
  }

  private fail(phase: Failure["phase"], message: string): void {
    if (this.failure !== undefined) return;
    this.failure = message;
    this.failedIn = { ok: false, phase, message };
    this.release();
    this.settle(this.failedIn);
  }

  private settle(outcome: FinishOutcome): void {
    const awaiting = this.awaiting;
    this.awaiting = undefined;
    awaiting?.(outcome);
  }

  private release(): void {
    const waiting = this.drained;
    this.drained = [];
    for (const resolve of waiting) resolve();
  }
}
