/**
 * Writing one batch of stream messages to the index, so that a record the index refuses on its own
 * account is skipped and the rest applied, while any other failure throws (the consumer restarts).
 */
import type { Logger } from "../../platform/logger.ts";
import type { RecordChange, SearchBackend } from "./backend.ts";
import { decodeRaw, errorText } from "./decode.ts";
import type { DecodedBatch } from "./decode-pipeline.ts";
import { isRecordError } from "./replica-policy.ts";

/** A change with the message it came from. */
export type Buffered = { change: RecordChange; seq: number; subject: string };

/** Where a batch goes, and who counts what is skipped. */
export type ApplyTarget = {
  readonly backend: SearchBackend;
  readonly log: Logger;
  skip(subject: string, seq: number, reason: string): void;
};

/**
 * Writes `items` and marks `upTo` applied; false when `upTo` was applied already (nothing written).
 * A change the index refuses on its own account is skipped, anything else throws.
 */
export function applyBatch(target: ApplyTarget, items: Buffered[], upTo: number): boolean {
  const { backend } = target;
  if (upTo === backend.appliedSeq()) return false;
  try {
    backend.apply(
      items.map((b) => b.change),
      upTo,
    );
  } catch (error) {
    if (!isRecordError(error)) throw error;
    // One change broke the batch: apply them one by one to find it (the batch was rolled back).
    target.log.warn({ err: error, seq: upTo, changes: items.length }, "a batch of record changes failed; applying them one by one");
    for (const { change, seq, subject } of items) {
      try {
        backend.apply([change], seq);
      } catch (single) {
        if (!isRecordError(single)) throw single;
        target.skip(subject, seq, `the index refused it: ${errorText(single)}`);
      }
    }
    backend.apply([], upTo);
  }
  return true;
}

/**
 * applyBatch for a batch decoded and prepared by the decode worker: one the index refuses is decoded
 * again here from its messages and applied one by one.
 */
export function applyPrepared(target: ApplyTarget, items: Buffered[], batch: DecodedBatch): boolean {
  const { backend } = target;
  if (batch.upTo === backend.appliedSeq()) return false;
  try {
    backend.apply(
      items.map((b) => b.change),
      batch.upTo,
      batch.parts,
    );
  } catch (error) {
    if (!isRecordError(error)) throw error;
    const raw = new Map(batch.raw.map((m) => [m.seq, m]));
    const again: Buffered[] = [];
    for (const { seq, subject } of items) {
      const change = decodeRaw(raw.get(seq)!);
      if (change.op !== "skip") again.push({ change, seq, subject });
    }
    applyBatch(target, again, batch.upTo);
  }
  return true;
}
