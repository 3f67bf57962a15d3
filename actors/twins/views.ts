/**
 * Watched views of recently read twins, so a read is answered from memory: one BucketView per twin
 * bucket (its whole history fed through TwinState), the least recently read dropped past `max`, each
 * drop ending its watch (docs/twins.md#reads-from-memory).
 */
import type { KV } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/nats-core";
import { BoundedCache } from "../../platform/bounded-cache.ts";
import { within } from "../../platform/clock.ts";
import type { Logger } from "../../platform/logger.ts";
import { toTwinEntry } from "../../platform/twin-commit.ts";
import { BucketView, directLastMessage } from "../runtime/bucket-view.ts";
import { TwinState } from "./state.ts";

/**
 * How long a read waits for a view (to open, or to catch up) before the twin is read from its stream instead:
 * a watch placed on a lost cluster server delivers nothing, and the read must not wait for it.
 */
export const VIEW_WAIT_MS = 1_500;
/** A view checks its stream's creation time this seldom; deletion advisories and each read's look notice sooner. */
const RECREATION_CHECK_MS = 300_000;

class TwinView {
  state = new TwinState();
  readonly view: BucketView;

  constructor(
    readonly kv: KV,
    name: string,
    nc: NatsConnection,
    log: Logger,
  ) {
    this.view = new BucketView(
      kv,
      {
        what: `twin ${name}`,
        from: "history",
        nc,
        checkEveryMs: RECREATION_CHECK_MS,
        lastMessage: directLastMessage(nc, kv),
        apply: (entry) => this.state.feed(toTwinEntry(entry)),
        reset: () => {
          this.state = new TwinState();
        },
      },
      log,
    );
  }
}

/** A view being opened or open (`ready` once it is), and the bucket handle it follows (known at once, before the view opens). */
type Opening = { kv: KV; view: Promise<TwinView>; ready?: TwinView };

export class TwinViews {
  private readonly views: BoundedCache<string, Opening>;

  constructor(
    private readonly nc: NatsConnection,
    private readonly log: Logger,
    max: number,
  ) {
    this.views = new BoundedCache({ max, onEvict: (_name, opening) => void stopView(opening.view) });
  }

  /** The twin's state with every write acknowledged before the call; a view that fails is dropped, the next read opens another. */
  async stateOf(name: string, kv: KV): Promise<TwinState> {
    let opening = this.views.get(name);
    if (opening && opening.kv !== kv) {
      // The bucket's handle changed (made again): the old view follows a stream that is gone.
      this.drop(name, opening);
      opening = undefined;
    }
    if (!opening) {
      const view = new TwinView(kv, name, this.nc, this.log);
      const started: Opening = {
        kv,
        view: view.view.start(VIEW_WAIT_MS).then(() => {
          started.ready = view;
          return view;
        }),
      };
      // A start that fails later than its wait is dropped then.
      started.view.catch(() => this.drop(name, started));
      this.views.set(name, (opening = started));
    }
    try {
      const view = opening.ready ?? (await within(opening.view, VIEW_WAIT_MS, `the view of twin ${name} did not open`));
      await view.view.fresh(VIEW_WAIT_MS);
      return view.state;
    } catch (error) {
      this.drop(name, opening);
      throw error;
    }
  }

  /** stateOf() when it would answer at once: the view open on `kv` and fresh without a wait; else undefined. */
  peek(name: string, kv: KV): TwinState | undefined {
    const opening = this.views.get(name);
    const view = opening?.kv === kv ? opening.ready : undefined;
    return view?.view.freshNow() ? view.state : undefined;
  }

  get size(): number {
    return this.views.size;
  }

  async stop(): Promise<void> {
    const all = [...this.views.values()];
    this.views.clear();
    await Promise.all(all.map((opening) => stopView(opening.view)));
  }

  private drop(name: string, opening: Opening): void {
    if (this.views.deleteIfHolds(name, opening)) void stopView(opening.view);
  }
}

async function stopView(view: Promise<TwinView> | undefined): Promise<void> {
  await (await view?.catch(() => undefined))?.view.stop();
}
