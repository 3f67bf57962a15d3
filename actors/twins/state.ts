/**
 * A twin's visible state, kept from its entries in revision order: the commit protocol applied
 * (TwinCommitGate), each key's newest visible entry, each group's newest commit record. Fed once per
 * entry, it answers any number of reads; a read over a list of entries feeds a fresh one.
 */
import { formatTwinEtag, parseTwinKey, type TwinCommit, type TwinGetReply, type TwinValue } from "../../subjects/twins.ts";
import { TwinCommitGate, parseTwinCommit, type TwinEntry } from "../../platform/twin-commit.ts";
import { EncodedJson } from "../../subjects/index.ts";

/** A read's answer as sent: the values' JSON, and the reply's headers (the group's ETag; frozen: sent again as they are). */
export type TwinAnswer = { body: EncodedJson<TwinGetReply>; headers: Readonly<Record<string, string>> };
const encoder = new TextEncoder();

/** Groups whose answers are kept at once (a twin has few; a bound all the same). */
const MAX_ANSWERS = 64;

export class TwinState {
  private readonly gate = new TwinCommitGate();
  private readonly latest = new Map<string, TwinEntry>();
  /** Per group, its commit record's newest entry (visible or not: the ETag is the record's version). */
  private readonly commits = new Map<string, TwinEntry>();
  /** The last answers per group ("" for all), until the next entry: reads far outnumber writes. */
  private readonly answers = new Map<string, TwinAnswer>();

  static of(entries: TwinEntry[]): TwinState {
    const state = new TwinState();
    for (const entry of [...entries].sort((a, b) => a.revision - b.revision)) state.feed(entry);
    return state;
  }

  feed(entry: TwinEntry): void {
    this.answers.clear();
    const parsed = parseTwinKey(entry.key);
    if (parsed?.kind === "commit") this.commits.set(parsed.group, entry);
    for (const visible of this.gate.feed(entry)) {
      // Deletes are kept as such: a later read must not see the value they removed.
      this.latest.set(visible.key, visible);
    }
  }

  /** Desired and reported values with versions and times, of every group or one, as JSON, with the group's ETag. */
  answer(group?: string): TwinAnswer {
    const known = this.answers.get(group ?? "");
    if (known) return known;
    const headers: Record<string, string> = group === undefined ? {} : { ETag: this.etag(group) };
    const out: TwinAnswer = {
      body: new EncodedJson<TwinGetReply>(encoder.encode(JSON.stringify(this.build(group)))),
      headers: Object.freeze(headers),
    };
    if (this.answers.size >= MAX_ANSWERS) this.answers.clear();
    this.answers.set(group ?? "", out);
    return out;
  }

  private build(group?: string): TwinGetReply {
    // Maps without a prototype: groups and names come from keys a device may have written.
    const out: TwinGetReply = { desired: Object.create(null), reported: Object.create(null) };
    for (const entry of this.latest.values()) {
      const parsed = parseTwinKey(entry.key);
      if (parsed?.kind !== "property" || entry.operation !== "PUT") continue;
      if (group !== undefined && parsed.group !== group) continue;
      const side = (out[parsed.side][parsed.group] ??= Object.create(null));
      const value: TwinValue = { value: entry.value, version: entry.revision, updated_at: entry.created.toISOString() };
      side[parsed.name] = value;
    }
    return out;
  }

  /** The group's ETag: its commit record's version (0 before the first PUT). */
  etag(group: string): string {
    return formatTwinEtag(this.commit(group)?.version ?? 0);
  }

  commit(group: string): TwinCommit | undefined {
    const entry = this.commits.get(group);
    return entry?.operation === "PUT" ? parseTwinCommit(entry.value) : undefined;
  }
}
