import type { Session } from "../api.ts";

export function ContentView(_: { session: Session }) {
  return <p>Coming.</p>;
}
