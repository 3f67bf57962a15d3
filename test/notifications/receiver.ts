/** A real webhook receiver on loopback for the notifications tests: records every request, answers as told. */
export type Received = { id: string; body: string; headers: Record<string, string>; at: number };

export type Receiver = {
  url: string;
  received: Received[];
  /** Decides the answer to each request (default 204); may return a promise to hold the request. */
  respond: (req: Received, count: number) => Response | Promise<Response>;
  stop(): void;
};

export function startReceiver(): Receiver {
  const receiver: Receiver = {
    url: "",
    received: [],
    respond: () => new Response(null, { status: 204 }),
    stop: () => server.stop(true),
  };
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(request) {
      const body = await request.text();
      const headers = Object.fromEntries(request.headers.entries());
      const entry = { id: headers["webhook-id"] ?? "", body, headers, at: Date.now() };
      receiver.received.push(entry);
      return receiver.respond(entry, receiver.received.length);
    },
  });
  receiver.url = `http://127.0.0.1:${server.port}`;
  return receiver;
}

/** A `respond` that never answers: each attempt to it ends with the delivery timeout. */
export const neverAnswer = (): Promise<Response> => new Promise<Response>(() => undefined);

/** Receivers started by one test file, all stopped by `stopAll()` after its last test. */
export function receiverPool(): { start(): Receiver; stopAll(): void } {
  const started: Receiver[] = [];
  return {
    start: () => {
      const r = startReceiver();
      started.push(r);
      return r;
    },
    stopAll: () => {
      for (const r of started) r.stop();
    },
  };
}
