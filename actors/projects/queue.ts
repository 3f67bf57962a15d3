/**
 * Limits of the content work queue (stream CONTENT_TASKS): the stream refuses a message past them (discard new), so they
 * hold across every projects process; on its requester's subject, a task counts against that requester's unfinished
 * tasks (docs/content.md#delivery-guarantees).
 */
import { createHash } from "node:crypto";

/** Bounds of the work queue; 0 = none. */
export type QueueLimits = {
  /** Unfinished (queued or running) tasks one requester may have in a partition. */
  perRequester: number;
  /** Unfinished tasks of everyone together. */
  total: number;
};
export const NO_QUEUE_LIMITS: QueueLimits = { perRequester: 0, total: 0 };

/**
 * The work-queue subject token of a requester (client id and subject): a digest, since both may hold
 * characters a subject cannot, and the queue's per-subject limit is then a per-requester limit.
 */
export function requesterQueue(requester: { clientId: string; subject: string }): string {
  return `r${createHash("sha256").update(`${requester.clientId}\n${requester.subject}`).digest("hex").slice(0, 32)}`;
}

/** A publish the work queue refused because a limit of QueueLimits was reached (nothing was queued). */
export class TaskQueueFull extends Error {
  constructor(readonly limit: keyof QueueLimits) {
    super(limit === "perRequester" ? "the requester's unfinished tasks are at the limit" : "the work queue is full");
    this.name = "TaskQueueFull";
  }
}
