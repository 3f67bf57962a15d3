/** Subject tokens: the only characters derrick lets into a NATS subject or KV key segment. */
import { invalidField } from "./errors.ts";
import { quoteValue } from "./validation.ts";

export const TOKEN_PATTERN = /^[A-Za-z0-9_-]{1,128}$/;

export function isToken(value: string): boolean {
  return TOKEN_PATTERN.test(value);
}

/** Returns the value when it is a safe token, else throws a 400 naming where it came from. */
export function checkToken(value: string, pointer: string): string {
  if (!isToken(value))
    throw invalidField(pointer, `${quoteValue(value)} does not match ${TOKEN_PATTERN.source} (letters, digits, "_" or "-", at most 128)`);
  return value;
}
