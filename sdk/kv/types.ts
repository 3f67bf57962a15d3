/** What the device SDK needs from a key-value store holding twin properties. */
import type { TwinSide } from "../../subjects/twins.ts";

export type TwinChange = {
  group: string;
  side: TwinSide;
  name: string;
  /** null when the property was deleted. */
  value: string | null;
  /** The KV revision (JetStream) or the mirrored revision (Redis); 0 when unknown. */
  version: number;
};

export type TwinValueRead = { value: string; version: number };

export interface TwinBackend {
  /**
   * Starts following the twin: `onChanges` gets the current values, then every visible change in order, and the
   * current values again after a reconnect (the client drops what it delivered). `onRecreated`: the store was made
   * again and its versions started over; the client forgets what it delivered, and the current values follow.
   */
  start(onChanges: (changes: TwinChange[]) => void, onRecreated?: () => void): Promise<void>;
  get(group: string, side: TwinSide, name: string): Promise<TwinValueRead | undefined>;
  put(group: string, side: TwinSide, name: string, value: string): Promise<number>;
  close(): Promise<void>;
}

export type SdkLog = (level: "debug" | "info" | "warn" | "error", message: string, data?: Record<string, unknown>) => void;
