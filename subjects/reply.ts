/** A reply with a status other than 200 or with HTTP headers for the edge to pass on. */
export class Reply<T = unknown> {
  constructor(
    readonly body: T,
    readonly status = 200,
    readonly headers: Record<string, string> = {},
  ) {}
}

export const reply = <T>(body: T, status = 200, headers: Record<string, string> = {}) => new Reply(body, status, headers);

/**
 * A body that is already JSON bytes, sent on as they are: a stored result (a KV value) need not be
 * parsed only to be serialized again on the way out.
 */
export class EncodedJson<T = unknown> {
  /** The type the bytes hold, for the compiler only. */
  declare readonly _shape?: T;
  constructor(
    readonly bytes: Uint8Array,
    /**
     * The same bytes are answered again (a cache holds them): worth compressing once for callers that take gzip,
     * the compressed form and the tag kept beside them (docs/edge.md#compressed-replies). Held bytes are never
     * changed once sent: both are worked out once per bytes object.
     */
    readonly held = false,
    /**
     * Another reply for the same resource may go compressed (its bytes are held elsewhere, or will be): this one says
     * so with `Vary: Accept-Encoding` though it goes as it is, so that a shared cache keys every reply alike.
     */
    readonly varies = held,
  ) {}
}
