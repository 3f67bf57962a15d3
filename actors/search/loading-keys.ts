/**
 * Which record row holds each (partition, key) during a bulk load into an empty replica, in place of
 * the unique key index: a record's key is the SHA-1 of its id, so each insert into that index lands on
 * a random leaf, and each commit wrote every leaf its batch touched (docs/search.md#work-across-threads-in-a-bulk-load).
 * The index is built once at the end of the load instead.
 *
 * A SHA-1 key is held by its first 52 bits (a number: ~40 bytes an entry, not the ~100 of its string);
 * the caller confirms a match against the row itself, and keys that share those bits with one held
 * already are held whole. Other keys are held whole.
 */
const SHA1_HEX = /^[0-9a-f]{40}$/;

const slotOf = (key: string): number | string => (SHA1_HEX.test(key) ? Number.parseInt(key.slice(0, 13), 16) : `\u0000${key}`);
const exactOf = (partition: string, key: string) => `${partition}\u0000${key}`;

export class LoadingKeys {
  private readonly bySlot = new Map<number | string, number>();
  private readonly exact = new Map<string, number>();

  /** The row held for (partition, key), once `holds(rid)` confirms that row is that record's. */
  find(partition: string, key: string, holds: (rid: number) => boolean): number | undefined {
    const rid = this.exact.get(exactOf(partition, key)) ?? this.bySlot.get(slotOf(key));
    return rid !== undefined && holds(rid) ? rid : undefined;
  }

  /** A new row for (partition, key), which find did not hold. */
  add(partition: string, key: string, rid: number): void {
    const slot = slotOf(key);
    if (this.bySlot.has(slot)) this.exact.set(exactOf(partition, key), rid);
    else this.bySlot.set(slot, rid);
  }

  /** The row of (partition, key) was deleted. */
  remove(partition: string, key: string, rid: number): void {
    if (this.exact.delete(exactOf(partition, key))) return;
    const slot = slotOf(key);
    if (this.bySlot.get(slot) === rid) this.bySlot.delete(slot);
  }

  get size(): number {
    return this.bySlot.size + this.exact.size;
  }
}
