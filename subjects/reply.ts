/** A reply with a status other than 200 or with HTTP headers for the edge to pass on. */
export class Reply<T = unknown> {
  constructor(
    readonly body: T,
    readonly status = 200,
    readonly headers: Record<string, string> = {},
  ) {}
}

export const reply = <T>(body: T, status = 200, headers: Record<string, string> = {}) => new Reply(body, status, headers);
