/**
 * Watched views of recently read twins, so a read is answered from memory: one BucketView per twin
 * bucket (its whole history fed through TwinState), the least recently read dropped past `max`, each
 * drop ending its watch (docs/twins.md#reads-from-memory).
 */
import type { KV } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/nats-core";
import { BoundedCache } from "../../platform/bounded-cache.ts";
import type { Logger } from "../../platform/logger.ts";
import { toTwinEntry } from "../../platform/twin-commit.ts";
import { BucketView, FRESH_WAIT_MS, directLastMessage } from "../runtime/bucket-view.ts";
import { TwinState } from "./state.ts";

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

export class TwinViews {
  private readonly views: BoundedCache<string, Promise<TwinView>>;

  constructor(
    private readonly nc: NatsConnection,
    private readonly log: Logger,
    max: number,
  ) {
    this.views = new BoundedCache({ max, onEvict: (_name, view) => void stopView(view) });
  }

  /** The twin's state with every write acknowledged before the call; a view that fails is dropped, the next read opens another. */
  async stateOf(name: string, kv: KV): Promise<TwinState> {
    let opening = this.views.get(name);
    if (opening && (await opening.catch(() => undefined))?.kv !== kv) {
      // The bucket's handle changed (made again): the old view follows a stream that is gone.
      this.drop(name, opening);
      opening = undefined;
    }
    if (!opening) {
      const view = new TwinView(kv, name, this.nc, this.log);
      opening = view.view.start(FRESH_WAIT_MS).then(() => view);
      this.views.set(name, opening);
    }
    const view = await opening.catch((error: unknown) => {
      this.drop(name, opening);
      throw error;
    });
    try {
      await view.view.fresh();
    } catch (error) {
      this.drop(name, opening);
      throw error;
    }
    return view.state;
  }

  get size(): number {
    return this.views.size;
  }

  async stop(): Promise<void> {
    const all = [...this.views.values()];
    this.views.clear();
    await Promise.all(all.map(stopView));
  }

  private drop(name: string, view: Promise<TwinView>): void {
    if (this.views.deleteIfHolds(name, view)) void stopView(view);
  }
}

async function stopView(view: Promise<TwinView> | undefined): Promise<void> {
  await (await view?.catch(() => undefined))?.view.stop();
}
