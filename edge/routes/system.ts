/** Operational routes: liveness, readiness, metrics, build info, echo and whoami. */
import { Elysia, t } from "elysia";
import { Svcm } from "@nats-io/services";
import type { Config } from "../../config/index.ts";
import { Problem, contentTooLarge, serviceName, unavailable } from "../../subjects/index.ts";
import type { Bus } from "../../platform/transport/index.ts";
import { ECHO_MAX_BYTES, EchoBody, systemEcho, systemInfo, systemStatus } from "../../subjects/system.ts";
import { Principal } from "../../subjects/principal.ts";
import type { EdgeMetrics } from "../metrics.ts";
import type { AuthPlugin, AuthOptions } from "../plugins/auth.ts";
import type { RouteBodyLimits } from "../plugins/body.ts";
import { problems, relayOn } from "../relay.ts";

const READINESS_TTL_MS = 1_000;
const PING_WAIT_MS = 500;

const Readiness = t.Object({ status: t.String(), nats: t.String(), actors: t.Record(t.String(), t.Boolean()) });

type ReadinessState = { ready: boolean; nats: string; actors: Record<string, boolean> };

/**
 * Pings every expected actor at most once per second; a missing one makes the edge not ready. One ping at a
 * time, shared by the probes arriving meanwhile: `/readyz` is public and a ping waits PING_WAIT_MS for a missing
 * actor, so a ping per probe would let anyone hold a shared-inbox request and a $SRV.PING to every actor each.
 */
function readinessProbe(cfg: Config, bus: Bus) {
  let cached: { at: number; value: ReadinessState } | undefined;
  let pinging: Promise<ReadinessState> | undefined;
  const probe = async (): Promise<ReadinessState> => {
    const actors: Record<string, boolean> = Object.fromEntries(cfg.actors.map((a) => [a, false]));
    const connected = !bus.nc.isClosed() && !bus.nc.isDraining();
    if (connected) {
      try {
        const client = new Svcm(bus.nc).client({ strategy: "timer", maxWait: PING_WAIT_MS });
        const pongs = await client.ping();
        for await (const pong of pongs) {
          const actor = cfg.actors.find((a) => serviceName(a) === pong.name);
          if (actor) actors[actor] = true;
          if (Object.values(actors).every(Boolean)) break;
        }
      } catch {
        // no responders at all: every actor stays false
      }
    }
    const value = { ready: connected && Object.values(actors).every(Boolean), nats: connected ? "connected" : "disconnected", actors };
    cached = { at: Date.now(), value };
    return value;
  };
  return (): Promise<ReadinessState> => {
    if (cached && Date.now() - cached.at < READINESS_TTL_MS) return Promise.resolve(cached.value);
    return (pinging ??= probe().finally(() => (pinging = undefined)));
  };
}

/**
 * The echo needs no credentials, so it takes at most ECHO_MAX_BYTES: refused by the body plugin on the
 * declared length before anything is read or parsed (chunked: as it is read), before any NATS work.
 */
export const systemBodyLimits: RouteBodyLimits = {
  "/v1/system/echo": {
    bytes: ECHO_MAX_BYTES,
    tooLarge: (size) =>
      contentTooLarge(`the echo takes at most ${ECHO_MAX_BYTES} bytes${size === undefined ? "" : `; this body is ${size}`}`),
  },
};

export const systemRoutes = (cfg: Config, bus: Bus, auth: AuthPlugin, metrics: EdgeMetrics) => {
  const readiness = readinessProbe(cfg, bus);
  const relay = relayOn(bus);
  const whoamiAuth: AuthOptions = { appkey: true };
  return (
    new Elysia({ name: "derrick-system-routes" })
      .use(auth)
      .get("/healthz", () => ({ status: "ok" }), {
        detail: { tags: ["system"], summary: "Liveness: the process is up" },
        response: t.Object({ status: t.String() }),
      })
      .get(
        "/readyz",
        async ({ set }) => {
          const state = await readiness();
          if (!state.ready) {
            const missing = Object.entries(state.actors)
              .filter(([, up]) => !up)
              .map(([a]) => a);
            const detail = state.nats !== "connected" ? "not connected to NATS" : `actors not answering: ${missing.join(", ")}`;
            throw unavailable(detail, 2);
          }
          set.headers["cache-control"] = "no-store";
          return { status: "ready", nats: state.nats, actors: state.actors };
        },
        {
          detail: { tags: ["system"], summary: "Readiness: NATS connected and every configured actor answering a ping" },
          response: { 200: Readiness, 503: Problem },
        },
      )
      .get(
        "/metrics",
        async ({ set }) => {
          set.headers["content-type"] = metrics.registry.contentType;
          return metrics.registry.metrics();
        },
        {
          detail: { tags: ["system"], summary: "Prometheus metrics" },
          response: t.String({ description: "Prometheus text exposition format" }),
        },
      )
      .get("/v1/system/info", ({ set, request }) => relay({ set, request }, systemInfo, undefined), {
        detail: { tags: ["system"], summary: "Build information, answered by the system actor" },
        response: systemInfo.reply,
      })
      // Anonymous: its size limit (systemBodyLimits) is checked before the body is read.
      .post("/v1/system/echo", ({ set, request, body }) => relay({ set, request }, systemEcho, body), {
        body: EchoBody,
        detail: {
          tags: ["system"],
          summary:
            "Echoes a small JSON object (at most 4 KiB; no credentials needed) through NATS and the system actor (benchmarks, smoke tests)",
        },
        response: systemEcho.reply,
      })
      .get("/v1/system/status", ({ set, request }) => relay({ set, request }, systemStatus, undefined), {
        auth: true,
        detail: {
          tags: ["system"],
          summary:
            "The fleet for operators (group derrick.operators): actor processes with load, streams and consumers, replica lag, dead letters",
        },
        response: { 200: systemStatus.reply, ...problems(401, 403, 503, 504) },
      })
      .get("/v1/system/whoami", ({ principal, partition }) => ({ principal, partition }), {
        auth: whoamiAuth,
        partition: true,
        detail: { tags: ["system"], summary: "The caller as the edge sees it (token, appkey and partition checked)" },
        response: t.Object({ principal: Principal, partition: t.String() }),
      })
  );
};
