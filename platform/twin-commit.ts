/**
 * The twin commit protocol that makes one PUT visible all at once: parsing a group's commit record
 * (TwinCommit in subjects/twins.ts), the gate every reader runs over a bucket's entries, and the view
 * a watcher of a whole bucket hands on. The twins actor, the twin-mirror actor and the device SDK all
 * import this module, so they cannot disagree.
 */
import { TypeCompiler } from "@sinclair/typebox/compiler";
import { isTwinName, parseTwinKey, TwinCommit } from "../subjects/twins.ts";

const twinCommitCheck = TypeCompiler.Compile(TwinCommit);

/**
 * A commit record's value as a TwinCommit, or undefined when it is none (not JSON, not the shape, naming no twin
 * name): written by a device or by hand, it counts as no record for readers and writers, and the next PUT claims
 * over it (docs/twins.md). Readers must never throw on it: a watch loop replays it after every restart.
 */
export function parseTwinCommit(value: string): TwinCommit | undefined {
  let record: unknown;
  try {
    record = JSON.parse(value);
  } catch {
    return undefined;
  }
  if (!twinCommitCheck.Check(record)) return undefined;
  if (!record.names.every(isTwinName)) return undefined;
  if (record.values && !Object.keys(record.values).every(isTwinName)) return undefined;
  return record;
}

/** A KV entry as the gate needs it (JetStream or a mirror). */
export type TwinEntry = { key: string; revision: number; operation: "PUT" | "DEL" | "PURGE"; value: string; created: Date };

/**
 * The commit protocol over entries in revision order: the entries visible now (held ones a commit releases
 * included), commit records hidden. Only each claimed name's newest entry is held, never seen before the commit,
 * so a gate following a bucket for months keeps no rewrites under a claim nobody commits (docs/twins.md).
 */
export class TwinCommitGate {
  private readonly pending = new Map<string, { revision: number; names: Set<string> }>();
  /** Per group, the newest held entry of each claimed name. */
  private readonly held = new Map<string, Map<string, TwinEntry>>();

  feed(entry: TwinEntry): TwinEntry[] {
    const parsed = parseTwinKey(entry.key);
    if (!parsed) return [];
    if (parsed.kind === "commit") {
      // An invalid record is no record (parseTwinCommit): like a deleted one, it releases the group.
      const record = entry.operation === "PUT" ? parseTwinCommit(entry.value) : undefined;
      // Claims are made by compare-and-swap on this record, one after another: any record after a
      // claim, a new claim included, means that claim was finished (by its writer or a taker-over).
      // A watcher that missed the commit in between (TwinWatchView) still releases what it held.
      const released = [...(this.held.get(parsed.group)?.values() ?? [])].sort((a, b) => a.revision - b.revision);
      this.held.delete(parsed.group);
      if (record?.state === "pending") this.pending.set(parsed.group, { revision: entry.revision, names: new Set(record.names) });
      else this.pending.delete(parsed.group);
      return released;
    }
    if (parsed.side === "desired") {
      const pending = this.pending.get(parsed.group);
      if (pending && entry.revision > pending.revision && pending.names.has(parsed.name)) {
        let names = this.held.get(parsed.group);
        if (!names) this.held.set(parsed.group, (names = new Map()));
        names.set(parsed.name, entry);
        return [];
      }
    }
    return [entry];
  }
}

/**
 * What a watcher of a whole twin bucket hands on: the gate's output, safe against messages it never receives (a
 * missed pending record would show a PUT by halves). Entries go on at once while revisions have no hole; from a
 * watch's start and after a hole, the net change once caught up (docs/twins.md#all-or-nothing-put-the-commit-protocol).
 */
export class TwinWatchView {
  private readonly gate = new TwinCommitGate();
  /** Visible entries not handed on yet, the newest per key (bounded by the twin's keys). */
  private readonly changed = new Map<string, TwinEntry>();
  private last = 0;
  /** No hole since the last point where the view caught up. */
  private contiguous = false;
  private holes = 0;
  private timer?: ReturnType<typeof setTimeout>;
  private checking = false;
  private stopped = false;

  constructor(
    private readonly options: {
      /** The bucket's stream's last sequence now. */
      lastSeq: () => Promise<number>;
      /** Gets the visible entries in revision order; calls are made in order (an async one is not awaited by the next). */
      emit: (entries: TwinEntry[]) => void | Promise<void>;
      /** A failed look at the stream (it is tried again). */
      onError?: (error: unknown) => void;
      /** How long the view waits after an entry with more pending before it looks whether it caught up. */
      settleMs?: number;
      /** Pause before looking again while not caught up. */
      retryMs?: number;
    },
  ) {}

  /** The next entry the watch delivered; `pending` is the KV entry's delta (a hint: 0 looks at once). */
  async feed(entry: TwinEntry, pending?: number): Promise<void> {
    if (this.last > 0 && entry.revision !== this.last + 1) {
      this.contiguous = false;
      this.holes++;
    }
    this.last = entry.revision;
    for (const visible of this.gate.feed(entry)) {
      this.changed.delete(visible.key);
      this.changed.set(visible.key, visible);
    }
    if (this.contiguous) return this.flush();
    this.schedule(pending === 0 ? 0 : (this.options.settleMs ?? 50));
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private schedule(ms: number): void {
    clearTimeout(this.timer);
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.check();
    }, ms);
    this.timer.unref?.();
  }

  private async check(): Promise<void> {
    if (this.checking || this.stopped || this.contiguous) return;
    this.checking = true;
    const holes = this.holes;
    let caughtUp = false;
    try {
      // Caught up when asked; entries fed since followed without a hole, so they are handed on too.
      caughtUp = (await this.options.lastSeq()) <= this.last && this.holes === holes;
    } catch (error) {
      this.options.onError?.(error);
    } finally {
      this.checking = false;
    }
    if (this.stopped) return;
    if (caughtUp) {
      this.contiguous = true;
      return this.flush();
    }
    // An entry fed meanwhile has its own look scheduled already.
    if (this.timer === undefined) this.schedule(this.options.retryMs ?? 250);
  }

  private async flush(): Promise<void> {
    if (this.changed.size === 0) return;
    const out = [...this.changed.values()].sort((a, b) => a.revision - b.revision);
    this.changed.clear();
    await this.options.emit(out);
  }
}

/** A nats.js KV entry as a TwinEntry (structural, so this module needs no KV import). */
export function toTwinEntry(entry: {
  key: string;
  revision: number;
  operation: "PUT" | "DEL" | "PURGE";
  created: Date;
  length: number;
  string(): string;
}): TwinEntry {
  return {
    key: entry.key,
    revision: entry.revision,
    operation: entry.operation,
    created: entry.created,
    value: entry.operation === "PUT" && entry.length > 0 ? entry.string() : "",
  };
}
