/**
 * One request/reply operation of an actor: its subject and the schemas of what it takes and answers.
 * The actor serves it with `endpoint(op, handler)` and the edge calls it with `relay({ set, request }, op, input)`,
 * so the compiler checks both sides of the seam against this one declaration.
 */
import { Type, type Static, type TSchema } from "@sinclair/typebox";
import { subjects } from "./names.ts";

type Names = typeof subjects;
/** Capabilities whose operations are request/reply builders in names.ts. */
type Capability = { [C in keyof Names]: Names[C] extends Record<string, unknown> ? C : never }[keyof Names];
type NoArgumentBuilders<C extends Capability> = { [K in keyof Names[C]]: Names[C][K] extends () => string ? K : never };
/** The operations of a capability: its builders that take no argument. */
export type OperationOf<C extends Capability> = NoArgumentBuilders<C>[keyof Names[C]] & string;

export type Operation<Req extends TSchema = TSchema, Rep extends TSchema = TSchema> = {
  /** `<capability>.<operation>`, e.g. `twins.put`. */
  readonly name: string;
  readonly subject: string;
  /** The endpoint's name in `$SRV.INFO` (the operation with dashes: `subscription-upsert`). */
  readonly endpoint: string;
  readonly request: Req;
  readonly reply: Rep;
  readonly summary?: string;
};

/** The request schema of an operation that reads no body: whatever comes is accepted and ignored. */
export const NoRequest = Type.Unknown();

/** The reply schema of an operation that answers 204 without a body. */
export const NoContent = Type.Void();

/** What an operation takes, as its request schema decodes it. */
export type RequestOf<O extends Operation> = Static<O["request"]>;
/** What an operation answers on success (the body of a 2xx reply). */
export type ReplyOf<O extends Operation> = Static<O["reply"]>;

export function operation<C extends Capability, K extends OperationOf<C>, Req extends TSchema, Rep extends TSchema>(
  capability: C,
  op: K,
  spec: { request: Req; reply: Rep; summary?: string; endpoint?: string },
): Operation<Req, Rep> {
  const subject = (subjects[capability] as unknown as Record<K, () => string>)[op]();
  return {
    name: `${capability}.${op}`,
    subject,
    endpoint: spec.endpoint ?? op.replaceAll(".", "-"),
    request: spec.request,
    reply: spec.reply,
    ...(spec.summary ? { summary: spec.summary } : {}),
  };
}
