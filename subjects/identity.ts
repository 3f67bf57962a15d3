/** Messages of the `identity` actor: the embedded OAuth issuer and the app registry. */
import { Type, type Static } from "@sinclair/typebox";
import { SUBJECT_TOKEN_PATTERN } from "../config/schema.ts";
import { NoContent, NoRequest, operation } from "./operation.ts";

export const TokenRequest = Type.Object({
  client_id: Type.String({ minLength: 1, maxLength: 256 }),
  client_secret: Type.String({ minLength: 1, maxLength: 1024 }),
  scope: Type.Optional(Type.String({ maxLength: 2048 })),
  /** The HTTP caller's address, set by the edge: failed authentications are counted per client id and address. */
  remote_address: Type.Optional(Type.String({ maxLength: 64 })),
});
export type TokenRequest = Static<typeof TokenRequest>;

/** RFC 6749 §5.1 token response. */
export const TokenResponse = Type.Object({
  access_token: Type.String(),
  token_type: Type.Literal("Bearer"),
  expires_in: Type.Integer(),
  scope: Type.Optional(Type.String()),
});
export type TokenResponse = Static<typeof TokenResponse>;

/** RFC 6749 §5.2 error response. */
export const OAuthError = Type.Object({ error: Type.String(), error_description: Type.Optional(Type.String()) });
export type OAuthError = Static<typeof OAuthError>;

export const Jwk = Type.Record(Type.String(), Type.Unknown());
export const Jwks = Type.Object({ keys: Type.Array(Jwk) });
export type Jwks = Static<typeof Jwks>;

export const AppkeyCheck = Type.Object({
  appkey: Type.String({ minLength: 1, maxLength: 1024 }),
  client_id: Type.String({ minLength: 1 }),
});
export type AppkeyCheck = Static<typeof AppkeyCheck>;
export const AppkeyCheckReply = Type.Object({ client_id: Type.String() });
export type AppkeyCheckReply = Static<typeof AppkeyCheckReply>;

/** A registered client as listed: secrets are never returned after creation. */
export const App = Type.Object({
  client_id: Type.String(),
  groups: Type.Array(Type.String()),
  created_at: Type.String(),
});
export type App = Static<typeof App>;

export const AppCreate = Type.Object(
  {
    client_id: Type.Optional(Type.String({ pattern: SUBJECT_TOKEN_PATTERN })),
    groups: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 256 }), { maxItems: 256 })),
  },
  { additionalProperties: false },
);
export type AppCreate = Static<typeof AppCreate>;
/** Shown once, at creation. */
export const AppCredentials = Type.Object({
  client_id: Type.String(),
  client_secret: Type.String(),
  appkey: Type.String(),
  groups: Type.Array(Type.String()),
});
export type AppCredentials = Static<typeof AppCredentials>;
export const AppList = Type.Object({ apps: Type.Array(App) });
export type AppList = Static<typeof AppList>;
export const AppDelete = Type.Object({ client_id: Type.String({ pattern: SUBJECT_TOKEN_PATTERN }) }, { additionalProperties: false });
export type AppDelete = Static<typeof AppDelete>;

/** A signing key of the embedded issuer as `derrick keys list` shows it. */
export const SigningKeyInfo = Type.Object({ kid: Type.String(), seen_at: Type.Optional(Type.String()) });
export const SigningKeyList = Type.Object({ keys: Type.Array(SigningKeyInfo) });
export type SigningKeyList = Static<typeof SigningKeyList>;
/** kid: an RFC 7638 thumbprint (base64url). */
export const KeyRevoke = Type.Object({ kid: Type.String({ pattern: "^[A-Za-z0-9_-]{1,128}$" }) }, { additionalProperties: false });
export type KeyRevoke = Static<typeof KeyRevoke>;

/**
 * How long an edge trusts an appkey it checked with the identity actor: a deleted client's appkey
 * (and so its access to the routes that need one) still works on an edge for up to this long.
 */
export const APPKEY_CACHE_MS = 30_000;

/** The `iss` of tokens minted by derrick's embedded issuer. */
export const EMBEDDED_ISSUER = "urn:derrick:issuer";

export const identityToken = operation("identity", "token", { request: TokenRequest, reply: TokenResponse });
export const identityJwks = operation("identity", "jwks", { request: NoRequest, reply: Jwks });
export const identityAppkeyVerify = operation("identity", "appkey.verify", { request: AppkeyCheck, reply: AppkeyCheckReply });
export const identityAppsCreate = operation("identity", "apps.create", { request: AppCreate, reply: AppCredentials });
export const identityAppsList = operation("identity", "apps.list", { request: NoRequest, reply: AppList });
export const identityAppsDelete = operation("identity", "apps.delete", { request: AppDelete, reply: NoContent });
export const identityKeysList = operation("identity", "keys.list", { request: NoRequest, reply: SigningKeyList });
export const identityKeysRevoke = operation("identity", "keys.revoke", { request: KeyRevoke, reply: NoContent });
