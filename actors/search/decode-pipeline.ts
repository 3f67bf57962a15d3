/**
 * The replica's side of the decode worker (decode-worker.ts) during a bulk load: collects stream messages
 * into batches, posts each with its payloads in one transferred buffer, and hands the prepared
 * changes back in order (`onDecoded`). The replica waits while MAX_IN_FLIGHT batches are out (`room()`), so
 * the memory of a load stays bounded however far the worker falls behind.
 */
import type { DecodedChange, DecodeReply, DecodeRequest } from "./decode-worker.ts";
import type { PreparedParts } from "./prepared.ts";
import type { RawMessage } from "./decode.ts";

const MAX_IN_FLIGHT = 2;

/** Decoded changes in message order, their lookup rows, and the messages as they came (to decode again one by one). */
export type DecodedBatch = { changes: DecodedChange[]; parts: PreparedParts; raw: RawMessage[]; upTo: number };

export class DecodePipeline {
  failure: string | undefined;
  private pending: RawMessage[] = [];
  private readonly inFlight: Array<{ raw: RawMessage[]; upTo: number }> = [];
  private waiters: Array<() => void> = [];

  private constructor(
    private readonly worker: Worker,
    private readonly onDecoded: (batch: DecodedBatch) => void,
  ) {
    worker.onmessage = (event: MessageEvent<DecodeReply>) => {
      if (event.data.type !== "decoded") return;
      const sent = this.inFlight.shift()!;
      this.wake();
      if (this.failure !== undefined) return;
      const changes = JSON.parse(event.data.changes) as DecodedChange[];
      let doc = 0;
      for (const change of changes) if (change.op === "prepared") change.record.json = event.data.docs[doc++]!;
      this.onDecoded({ changes, parts: event.data.parts, ...sent });
    };
    worker.onerror = (event) => this.fail(event.message || "the decode worker crashed");
    // A worker that ends without an error (or after one) settles whatever waits on it.
    worker.addEventListener("close", () => this.fail("the decode worker exited"));
  }

  /** A running decode worker, or why there is none. */
  static async start(
    onDecoded: (batch: DecodedBatch) => void,
    module = new URL("./decode-worker.ts", import.meta.url),
  ): Promise<DecodePipeline | string> {
    let worker: Worker;
    try {
      worker = new Worker(module);
    } catch (error) {
      return String(error);
    }
    return new Promise((resolve) => {
      worker.onmessage = (event: MessageEvent<DecodeReply>) =>
        resolve(event.data.type === "ready" ? new DecodePipeline(worker, onDecoded) : "unexpected reply");
      worker.onerror = (event) => {
        worker.terminate();
        resolve(event.message || "the decode worker did not start");
      };
      worker.postMessage({ type: "ping" });
    });
  }

  add(message: RawMessage): void {
    this.pending.push(message);
  }

  get size(): number {
    return this.pending.length;
  }

  /** Posts the messages added since the last send (their changes come back through onDecoded). */
  send(upTo: number): void {
    const batch = this.pending;
    if (batch.length === 0 || this.failure !== undefined) return;
    this.pending = [];
    let total = 0;
    for (const m of batch) total += m.data.length;
    const bytes = new Uint8Array(total);
    const ends: number[] = new Array(batch.length);
    let at = 0;
    batch.forEach((m, i) => {
      bytes.set(m.data, at);
      ends[i] = at += m.data.length;
    });
    const request: DecodeRequest = {
      type: "decode",
      subjects: batch.map((m) => m.subject),
      seqs: batch.map((m) => m.seq),
      deleted: batch.map((m) => m.deleted),
      timestamps: batch.map((m) => m.timestampMs ?? Date.now()),
      ends,
      bytes,
    };
    this.inFlight.push({ raw: batch, upTo });
    this.worker.postMessage(request, [bytes.buffer]);
  }

  /** Settles once fewer than MAX_IN_FLIGHT batches are out (undefined when that is already so). */
  room(): Promise<void> | undefined {
    return this.inFlight.length < MAX_IN_FLIGHT || this.failure !== undefined
      ? undefined
      : this.waitFor(() => this.inFlight.length < MAX_IN_FLIGHT);
  }

  /** Settles once every batch sent came back (or the worker failed). */
  drained(): Promise<void> {
    return this.inFlight.length === 0 || this.failure !== undefined ? Promise.resolve() : this.waitFor(() => this.inFlight.length === 0);
  }

  /** Ends the worker; what it had not sent back is dropped (the replica resumes after what it applied). */
  terminate(): void {
    this.worker.terminate();
    this.fail("terminated");
  }

  private waitFor(done: () => boolean): Promise<void> {
    return new Promise((resolve) => {
      const check = () => {
        if (done() || this.failure !== undefined) resolve();
        else this.waiters.push(check);
      };
      check();
    });
  }

  private wake(): void {
    const waiting = this.waiters;
    this.waiters = [];
    for (const check of waiting) check();
  }

  private fail(message: string): void {
    this.failure ??= message;
    this.wake();
  }
}
