/** What `derrick config` prints: the configuration without its secrets. */
import type { Config } from "./schema.ts";

/** The configuration with every secret replaced: passwords, client secrets and appkeys, OTLP export headers, and credentials inside URLs. */
export function maskedConfig(cfg: Config): unknown {
  return {
    ...cfg,
    ...(cfg.natsPassword ? { natsPassword: "***" } : {}),
    ...(cfg.natsUrl ? { natsUrl: cfg.natsUrl.split(",").map(withoutCredentials).join(",") } : {}),
    auth: { ...cfg.auth, ...(cfg.auth.jwksUrl ? { jwksUrl: withoutCredentials(cfg.auth.jwksUrl) } : {}) },
    clients: cfg.clients?.map((c) => ({ ...c, client_secret: "***", appkey: "***" })),
    twinMirrors: cfg.twinMirrors.map((m) => ({ ...m, redis: withoutCredentials(m.redis) })),
    // Export headers usually carry an API key.
    tracing: {
      ...cfg.tracing,
      headers: masked(cfg.tracing.headers),
      tracesHeaders: masked(cfg.tracing.tracesHeaders),
      ...(cfg.tracing.endpoint ? { endpoint: withoutCredentials(cfg.tracing.endpoint) } : {}),
      ...(cfg.tracing.tracesEndpoint ? { tracesEndpoint: withoutCredentials(cfg.tracing.tracesEndpoint) } : {}),
    },
  };
}

const masked = (values: Record<string, string>) => Object.fromEntries(Object.keys(values).map((key) => [key, "***"]));

/** A URL (or a comma list of them) with any user and password replaced by `***`. */
export function withoutCredentials(url: string): string {
  // Only the userinfo changes; anything URL cannot parse is shown as given (config accepted it).
  // The scheme is optional (NATS_URL takes host:port forms); the userinfo ends at the last @ before the path (a password may hold @).
  return url.replace(/^((?:[a-z][a-z0-9+.-]*:\/\/)?)[^/]*@/i, (_, scheme: string) => `${scheme}***@`);
}
