/**
 * Telling a message published to a subject from one a JetStream push consumer delivered there, which can
 * replay a stored message, headers included, onto any subject: the delivery keeps its stream subject and a
 * `$JS.ACK.…` reply. Actor endpoints and device subscriptions drop it (docs/security.md#deliveries-are-not-requests).
 */

/** NATS subject matching: `*` is one token, `>` one or more trailing tokens. */
export function matchesSubject(pattern: string, subject: string): boolean {
  if (!pattern.includes("*") && !pattern.includes(">")) return pattern === subject;
  const want = pattern.split(".");
  const have = subject.split(".");
  for (let i = 0; i < want.length; i++) {
    if (want[i] === ">") return have.length > i;
    if (i >= have.length || (want[i] !== "*" && want[i] !== have[i])) return false;
  }
  return want.length === have.length;
}

/** True for a message published to (a subject matching) `pattern`, not delivered by JetStream. */
export function isPublishedTo(msg: { subject: string; reply?: string }, pattern: string): boolean {
  return !msg.reply?.startsWith("$JS.") && matchesSubject(pattern, msg.subject);
}
