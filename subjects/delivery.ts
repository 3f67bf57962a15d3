/**
 * Telling a message published to a subject from one a JetStream push consumer delivered there.
 *
 * A push consumer can deliver its stream's messages to any subject, whatever its creator may publish
 * to (nats-server#8274). A device may create consumers on its own twin bucket (its SDK watches the
 * bucket that way), so it could aim one at an actor's subject or at another device's subscription and
 * replay whatever it stored in its bucket, headers included. Such a delivery keeps the stream
 * message's own subject (`$KV.<bucket>.…`) and carries a `$JS.ACK.…` reply; a plain publish or
 * request has the subject it was sent to and an inbox reply. Receivers that must not take such
 * messages (actor endpoints, device subscriptions) check both.
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
