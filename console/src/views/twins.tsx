import type { Session } from "../api.ts";

export function TwinsView(_: { session: Session }) {
  return <p>Coming.</p>;
}
