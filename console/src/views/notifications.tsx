import type { Session } from "../api.ts";

export function NotificationsView(_: { session: Session }) {
  return <p>Coming.</p>;
}
