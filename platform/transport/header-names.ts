/** HTTP header names are case-insensitive (RFC 9110 §5.1): reply headers are plain records, looked up by any case. */

/** The name `headers` gives the header `lower` (a lower-case name), if any. */
export function headerNamed(headers: Readonly<Record<string, string>>, lower: string): string | undefined {
  for (const name in headers) if (name.length === lower.length && name.toLowerCase() === lower) return name;
  return undefined;
}
