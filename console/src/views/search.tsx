import type { Session } from "../api.ts";

export function SearchView(_: { session: Session }) {
  return <p>Coming.</p>;
}
