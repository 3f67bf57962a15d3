import type { Session } from "../api.ts";

export function ReportingView(_: { session: Session }) {
  return <p>Coming.</p>;
}
