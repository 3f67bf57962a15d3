/**
 * Callback safety (SSRF): callbacks reach only public unicast addresses unless DERRICK_CALLBACK_ALLOW_CIDRS allows a
 * range, plain http:// only with DERRICK_CALLBACK_ALLOW_HTTP. Checked at create, then on every resolved address at
 * delivery, which connects to the checked address so DNS rebinding cannot redirect it (docs/notifications.md#callback-safety-ssrf).
 */
import net from "node:net";
import { lookup } from "node:dns/promises";

/** Ranges no callback may reach by default: the union of what Svix refuses (post-DNS) and the IANA special-purpose registries. */
const BLOCKED_V4: Array<[string, number]> = [
  ["0.0.0.0", 8], // "this" network
  ["10.0.0.0", 8], // private
  ["100.64.0.0", 10], // CGNAT
  ["127.0.0.0", 8], // loopback
  ["169.254.0.0", 16], // link-local, cloud metadata (169.254.169.254)
  ["172.16.0.0", 12], // private
  ["192.0.0.0", 24], // IETF protocol assignments
  ["192.0.2.0", 24], // documentation
  ["192.88.99.0", 24], // 6to4 relay
  ["192.168.0.0", 16], // private
  ["198.18.0.0", 15], // benchmarking
  ["198.51.100.0", 24], // documentation
  ["203.0.113.0", 24], // documentation
  ["224.0.0.0", 4], // multicast
  ["240.0.0.0", 4], // reserved, broadcast
];
const BLOCKED_V6: Array<[string, number]> = [
  ["::", 128], // unspecified
  ["::1", 128], // loopback
  ["::", 96], // IPv4-compatible (deprecated): ::a.b.c.d
  ["::ffff:0:0:0", 96], // IPv4-translated (SIIT)
  ["2001::", 32], // Teredo
  ["64:ff9b::", 96], // NAT64
  ["64:ff9b:1::", 48], // local NAT64
  ["100::", 64], // discard
  ["2001:db8::", 32], // documentation
  ["2002::", 16], // 6to4
  ["fc00::", 7], // unique local
  ["fe80::", 10], // link-local
  ["fec0::", 10], // site-local (deprecated)
  ["ff00::", 8], // multicast
  ["fd00:ec2::254", 128], // AWS metadata over IPv6
];
/** Names that always mean this machine or a metadata service, whatever DNS says. */
const LOCAL_NAMES =
  /^(localhost|localhost\.localdomain|ip6-localhost|ip6-loopback|metadata|metadata\.google\.internal|instance-data)\.?$|\.localhost\.?$/i;

export type CallbackPolicy = {
  allowHttp: boolean;
  /** Operator-allowed ranges, checked before the blocked ones. */
  allowed: net.BlockList;
  blocked: net.BlockList;
};

export function callbackPolicy(options: { allowHttp: boolean; allowCidrs?: readonly string[] }): CallbackPolicy {
  const blocked = new net.BlockList();
  for (const [address, prefix] of BLOCKED_V4) blocked.addSubnet(address, prefix, "ipv4");
  for (const [address, prefix] of BLOCKED_V6) blocked.addSubnet(address, prefix, "ipv6");
  const allowed = new net.BlockList();
  for (const cidr of options.allowCidrs ?? []) {
    const [address, prefixText] = cidr.split("/");
    const family = net.isIP(address ?? "");
    if (!family) throw new Error(`DERRICK_CALLBACK_ALLOW_CIDRS: "${cidr}" is not an address or CIDR`);
    const prefix = prefixText === undefined ? (family === 4 ? 32 : 128) : Number(prefixText);
    allowed.addSubnet(address!, prefix, family === 4 ? "ipv4" : "ipv6");
  }
  return { allowHttp: options.allowHttp, allowed, blocked };
}

/** Why an address may not be called, or undefined when it may. */
export function refuseAddress(policy: CallbackPolicy, address: string): string | undefined {
  const family = net.isIP(address);
  if (!family) return `${address} is not an IP address`;
  const type = family === 4 ? "ipv4" : "ipv6";
  if (policy.allowed.check(address, type)) return undefined;
  // IPv4-mapped IPv6 (::ffff:a.b.c.d) is judged as the IPv4 address it carries.
  const mapped = family === 6 ? /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)?.[1] : undefined;
  if (mapped) return refuseAddress(policy, mapped);
  if (policy.blocked.check(address, type))
    return `${address} is a loopback, private, link-local, CGNAT, multicast, reserved or metadata address (a deployment allows ranges with DERRICK_CALLBACK_ALLOW_CIDRS, e.g. 127.0.0.0/8 for a receiver on its own machine)`;
  return undefined;
}

/** The host of a URL without IPv6 brackets. */
export function hostOf(url: URL): string {
  return url.hostname.replace(/^\[|\]$/g, "");
}

/**
 * What is wrong with how a callback is written when the URL parser would repair it (whitespace, `\` read as `/`, a host
 * taken from `http:///h` or `https:h`): such text names another URL than it seems to, so it is refused, not guessed
 * (docs/notifications.md#subscriptions). What passes is stored in canonical form (`canonicalCallbackUri`).
 */
function writtenProblem(uri: string): string | undefined {
  if (/[\s\\]/.test(uri) || /[\x00-\x1F\x7F]/.test(uri)) return "must not contain whitespace, control characters or backslashes";
  const authority = /^https?:\/\/([^/?#]*)/i.exec(uri)?.[1];
  if (authority === undefined) return "must start with http:// or https:// and the host";
  if (authority === "" || authority.startsWith(":")) return "must name a host after http:// or https://";
  if (authority.includes("@")) return "must not carry credentials; use callback_headers";
  return undefined;
}

/** The form a callback accepted by `refuseCallbackUri` is stored, shown and called in (lower-case scheme and host, no default port, at least `/` as path). */
export function canonicalCallbackUri(uri: string): string {
  return new URL(uri).href;
}

/** Create-time check: scheme, how it is written, port, credentials, IP literals and local names. Returns the reason to refuse. */
export function refuseCallbackUri(policy: CallbackPolicy, uri: string): string | undefined {
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return "must be an absolute URI";
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") return "must be an http(s) URI";
  if (url.protocol === "http:" && !policy.allowHttp)
    return "must use https (a deployment allows plain http with DERRICK_CALLBACK_ALLOW_HTTP=true, e.g. for a local receiver)";
  if (url.username || url.password) return "must not carry credentials; use callback_headers";
  if (url.hash) return "must not have a fragment";
  const written = writtenProblem(uri);
  if (written) return written;
  if (url.port === "0") return "must not use port 0";
  const host = hostOf(url);
  if (net.isIP(host)) return refuseAddress(policy, host);
  if (LOCAL_NAMES.test(host)) {
    // A local name is refused unless loopback itself is allowed.
    return refuseAddress(policy, "127.0.0.1")
      ? `${host} names this machine or a metadata service (a deployment allows it with DERRICK_CALLBACK_ALLOW_CIDRS=127.0.0.0/8)`
      : undefined;
  }
  return undefined;
}

export type ResolvedTarget = { url: URL; address: string; family: 4 | 6 };

/**
 * A callback the policy refuses. The message goes to the subscriber (the attempt log); the detail,
 * which names the address a name resolved to, only to the server's log: a subscriber must not learn
 * the internal addresses behind names by subscribing to them.
 */
export class CallbackRefused extends Error {
  constructor(
    message: string,
    readonly detail: string,
  ) {
    super(message);
    this.name = "CallbackRefused";
  }
}

export type Resolver = (host: string) => Promise<Array<{ address: string; family: number }>>;
const systemResolver: Resolver = (host) => lookup(host, { all: true, verbatim: true });

/** Delivery-time check: resolves the host, refuses if any answer is refused, returns the address to connect to. */
export async function resolveCallback(policy: CallbackPolicy, uri: string, resolve: Resolver = systemResolver): Promise<ResolvedTarget> {
  const reason = refuseCallbackUri(policy, uri);
  if (reason) throw new CallbackRefused(`callback refused: ${reason}`, reason);
  const url = new URL(uri);
  const host = hostOf(url);
  const family = net.isIP(host);
  if (family) return { url, address: host, family: family as 4 | 6 };
  const answers = await resolve(host);
  if (answers.length === 0) throw new Error(`callback refused: ${host} does not resolve`);
  // Every answer must pass: otherwise a rebinding name could pass on one answer and connect on another.
  for (const answer of answers) {
    const why = refuseAddress(policy, answer.address);
    if (why)
      throw new CallbackRefused(`callback refused: ${host} resolves to an address callbacks may not reach`, `${host} resolves to ${why}`);
  }
  const first = answers[0]!;
  return { url, address: first.address, family: first.family as 4 | 6 };
}
