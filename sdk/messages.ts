/**
 * The message model of the original SDK: IoPoint and the IODataReport envelope
 * `{header: {SrcModule, MessageType, ConfigVersion, MessageID, TimeStamp}, device: [{id, tags}]}`.
 * Units follow the `uom` = `<quantity>:<unit>` (+ `prop`) metadata convention: `ioPointProblems`
 * reports a point that does not follow it, but the SDK neither refuses nor converts units.
 */

export type IoPoint = {
  value?: number;
  value_str?: string;
  /** 0 good, 1 bad. */
  quality_code?: number;
  /** Seconds since the epoch. */
  timestamp?: number;
  /** Name/value pairs; `uom` and `prop` by convention. */
  metadata?: Record<string, string>;
};

/** What `ioPoint`/`dataReport` take: any field may also be `null`, left out like the original encoder's None fields. */
export type IoPointInput = { [K in keyof IoPoint]?: IoPoint[K] | null };

export type IoDataReportHeader = {
  SrcModule: string;
  MessageType: "IODataReport";
  ConfigVersion: number;
  MessageID: number;
  TimeStamp: number;
};
export type IoDataReport = { header: IoDataReportHeader; device: Array<{ id: string; tags: Record<string, IoPoint> }> };

const UOM_RE = /^[^:\s][^:]*:[^:\s][^:]*$/;

/** The problems with an IoPoint's shape (empty when fine): field types and the uom/prop convention. */
export function ioPointProblems(point: unknown): string[] {
  const { errors, advisories } = checkIoPoint(point);
  return [...errors, ...advisories];
}

/** Field type errors (the point is refused) apart from unit-convention advisories (reported only). */
function checkIoPoint(point: unknown): { errors: string[]; advisories: string[] } {
  const problems: string[] = [];
  const advisories: string[] = [];
  if (typeof point !== "object" || point === null || Array.isArray(point)) return { errors: ["must be an object"], advisories };
  // Every field is optional and the original encoder omits None fields, so null is the same as absent.
  const p = Object.fromEntries(Object.entries(point).filter(([, v]) => v !== null)) as Record<string, unknown>;
  const known = new Set(["value", "value_str", "quality_code", "timestamp", "metadata"]);
  for (const key of Object.keys(point)) if (!known.has(key)) problems.push(`${key}: is not an IoPoint field`);
  if (p.value !== undefined && (typeof p.value !== "number" || !Number.isFinite(p.value))) problems.push("value: must be a number");
  if (p.value_str !== undefined && typeof p.value_str !== "string") problems.push("value_str: must be a string");
  if (p.quality_code !== undefined && !Number.isInteger(p.quality_code)) problems.push("quality_code: must be an integer");
  if (p.timestamp !== undefined && (typeof p.timestamp !== "number" || !Number.isFinite(p.timestamp)))
    problems.push("timestamp: must be a number");
  if (p.metadata !== undefined) {
    if (typeof p.metadata !== "object" || p.metadata === null || Array.isArray(p.metadata))
      problems.push("metadata: must be an object of name/value pairs");
    else {
      const meta = p.metadata as Record<string, unknown>;
      for (const [k, v] of Object.entries(meta)) if (typeof v !== "string") problems.push(`metadata/${k}: must be a string`);
      // The SDK neither refuses nor converts units: the uom convention is advisory.
      if (typeof meta.uom === "string" && !UOM_RE.test(meta.uom))
        advisories.push(`metadata/uom: "${meta.uom}" should look like <quantity>:<unit>`);
      if (meta.prop !== undefined && meta.uom === undefined)
        advisories.push("metadata/prop: names the property a uom applies to, so it needs metadata/uom");
    }
  }
  return { errors: problems, advisories };
}

/**
 * An IoPoint without null or undefined fields (the original encoder omits None fields). Throws a TypeError
 * on a field of the wrong type; a point off the uom/prop convention passes (see `ioPointProblems`).
 */
export function ioPoint(point: IoPointInput): IoPoint {
  const { errors } = checkIoPoint(point);
  if (errors.length) throw new TypeError(`invalid IoPoint: ${errors.join("; ")}`);
  return Object.fromEntries(Object.entries(point).filter(([, v]) => v !== undefined && v !== null)) as IoPoint;
}

/** MessageIDs start at tenths of a second since 1 January (UTC) of this year, then count up. */
export function messageIdSequence(now = new Date()): () => number {
  let next = Math.floor((now.getTime() - Date.UTC(now.getUTCFullYear(), 0, 1)) / 100);
  return () => next++;
}

/** Builds an IODataReport, one device, tags → IoPoints. */
export function dataReport(options: {
  srcModule: string;
  messageId: number;
  deviceId: string;
  tags: Record<string, IoPointInput>;
  configVersion?: number;
  now?: number;
}): IoDataReport {
  const tags = Object.fromEntries(Object.entries(options.tags).map(([tag, point]) => [tag, ioPoint(point)]));
  return {
    header: {
      SrcModule: options.srcModule,
      MessageType: "IODataReport",
      ConfigVersion: options.configVersion ?? 1,
      MessageID: options.messageId,
      TimeStamp: Math.floor((options.now ?? Date.now()) / 1000),
    },
    device: [{ id: options.deviceId, tags }],
  };
}
