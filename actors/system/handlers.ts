/** The built-in `system` actor: proves the request path end to end and reports the build. */
import type { BuildInfo, EchoBody, PingReply } from "../../subjects/system.ts";

export function ping(instance: string, version: string): PingReply {
  return { actor: "system", version, instance, time: new Date().toISOString() };
}

export function echo(body: EchoBody | undefined): EchoBody {
  return body ?? {};
}

export function info(build: BuildInfo): BuildInfo {
  return build;
}
