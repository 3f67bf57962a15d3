/** Who is calling: decided once by the edge from a verified token, carried to actors in headers. */
import { Type, type Static } from "@sinclair/typebox";

export const TokenKind = { user: "user", service: "service" } as const;
export type TokenKind = (typeof TokenKind)[keyof typeof TokenKind];

export const Principal = Type.Object({
  /** `client_id` claim, else `azp`, else `sub`. */
  clientId: Type.String(),
  /** `sub` claim: the user for user tokens, the client for service tokens. */
  subject: Type.String(),
  groups: Type.Array(Type.String()),
  kind: Type.Union([Type.Literal(TokenKind.user), Type.Literal(TokenKind.service)]),
});
export type Principal = Static<typeof Principal>;

/**
 * A principal as an actor receives it: one object per distinct caller, shared by that caller's requests and frozen
 * (the transport decodes each principal's JSON once). Read it; build a new object to change anything.
 */
export type SharedPrincipal = Readonly<Omit<Principal, "groups">> & { readonly groups: readonly string[] };
