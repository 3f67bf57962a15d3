/**
 * Checking a value against its TypeBox schema, with failures as 400 problems whose `errors` name
 * each offending field by JSON pointer. Shared by actors (NATS callers are not trusted either) and
 * the edge's error mapping.
 */
import { FormatRegistry, Kind, type TSchema, type Static } from "@sinclair/typebox";
import { TypeCompiler, type TypeCheck } from "@sinclair/typebox/compiler";
import { ValueErrorType, type ValueError } from "@sinclair/typebox/errors";
import { DerrickError, type FieldError } from "./errors.ts";

// Formats used by derrick schemas; Elysia registers its own set too, so only fill the gaps.
const FORMATS: Record<string, (value: string) => boolean> = {
  email: (v) => /^[^\s@]{1,64}@[^\s@]{1,255}\.[^\s@]{2,}$/.test(v) && v.length <= 320,
  uri: (v) => {
    try {
      return Boolean(new URL(v).protocol);
    } catch {
      return false;
    }
  },
  "date-time": (v) => /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/i.test(v) && !Number.isNaN(Date.parse(v)),
  uuid: (v) => /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(v),
};
for (const [name, check] of Object.entries(FORMATS)) if (!FormatRegistry.Has(name)) FormatRegistry.Set(name, check);

const compiled = new WeakMap<TSchema, TypeCheck<TSchema>>();

function checker<T extends TSchema>(schema: T): TypeCheck<T> {
  let check = compiled.get(schema);
  if (!check) {
    check = TypeCompiler.Compile(schema);
    compiled.set(schema, check);
  }
  return check as TypeCheck<T>;
}

/**
 * A value other than null refused by `X | null` (an optional field that also takes null) is refused
 * by X: report what X says, so a too-long entry of a nullable list is named with its index and its
 * rule instead of "expected union value" on the list.
 */
function* nullableBranches(errors: Iterable<ValueError>): Iterable<ValueError> {
  for (const error of errors) {
    const variants = (error.schema as { anyOf?: TSchema[] }).anyOf;
    const other = variants?.length === 2 ? variants.findIndex((v) => v[Kind] !== "Null") : -1;
    if (
      error.type === ValueErrorType.Union &&
      error.value !== null &&
      other >= 0 &&
      variants![1 - other]![Kind] === "Null" &&
      error.errors?.[other]
    ) {
      const inner = [...nullableBranches(error.errors[other]!)];
      if (inner.length > 0) {
        yield* inner;
        continue;
      }
    }
    yield error;
  }
}

/** TypeBox errors as field errors; unions report once per field, not once per branch (`X | null`: X's errors). */
export function fieldErrors(errors: Iterable<ValueError>, prefix = "", max = 20): FieldError[] {
  const out: FieldError[] = [];
  const seen = new Set<string>();
  for (const error of nullableBranches(errors)) {
    const pointer = `${prefix}${error.path}` || "/";
    if (seen.has(pointer)) continue;
    seen.add(pointer);
    out.push({ pointer, message: describe(error) });
    if (out.length >= max) break;
  }
  return out;
}

/** A value a message quotes back: JSON-quoted, its first 40 characters (a request's own text, kept short). */
export function quoteValue(value: string): string {
  return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
}

function describe(error: ValueError): string {
  const schema = (error.schema ?? {}) as Record<string, unknown>;
  if (error.message?.startsWith("Unexpected property")) return "is not a known field";
  // The value next to the rule it breaks: `"bad group" does not match '^[A-Za-z0-9_=-]{1,128}$'`.
  if (typeof schema.pattern === "string" && typeof error.value === "string" && /match/i.test(error.message ?? ""))
    return `${quoteValue(error.value)} does not match '${schema.pattern}'`;
  if (schema.format && typeof error.value === "string") return `must be a valid ${schema.format}`;
  const allowed = literalsOf(schema);
  if (allowed) return `${describeValue(error.value)} is not one of ${allowed}`;
  return (error.message ?? "is not valid").replace(/^Expected/, "expected");
}

/** The accepted values of an enumeration (a union of literals), listed for a refusal; undefined for any other schema. */
function literalsOf(schema: Record<string, unknown>): string | undefined {
  const variants = schema.anyOf as Array<{ const?: unknown }> | undefined;
  if (!variants?.length || !variants.every((v) => v.const !== undefined)) return undefined;
  const shown = variants.slice(0, 12).map((v) => JSON.stringify(v.const));
  return `${shown.join(", ")}${variants.length > shown.length ? `, … (${variants.length} in all)` : ""}`;
}

function describeValue(value: unknown): string {
  return typeof value === "string" ? quoteValue(value) : value === undefined ? "nothing" : String(JSON.stringify(value)).slice(0, 40);
}

export function validationError(errors: FieldError[], what = "request"): DerrickError {
  const first = errors[0];
  const detail = first
    ? `${first.pointer}: ${first.message}${errors.length > 1 ? ` (and ${errors.length - 1} more)` : ""}`
    : `invalid ${what}`;
  return new DerrickError(400, detail, { type: "validation", title: "Bad Request", errors });
}

/** Returns the value typed by the schema, or throws a 400 naming every offending field. */
export function check<T extends TSchema>(schema: T, value: unknown, prefix = "/body"): Static<T> {
  const compiledCheck = checker(schema);
  if (compiledCheck.Check(value)) return value as Static<T>;
  throw validationError(fieldErrors(compiledCheck.Errors(value), prefix));
}
