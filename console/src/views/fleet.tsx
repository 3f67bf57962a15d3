/** Fleet (group derrick.operators): actor kinds and processes with their load, streams and consumers, replica lag, dead letters. */
import { fleetStatus, type Session } from "../api.ts";
import { ErrorNote, Section, Table, formatNumber, formatTime, usePoll } from "../ui.tsx";

const REFRESH_MS = 2_000;

export function FleetView({ session }: { session: Session }) {
  const { value: fleet, error } = usePoll(() => fleetStatus(session), REFRESH_MS, [session]);
  if (!fleet) return error ? <ErrorNote error={error} /> : <p>Loading…</p>;
  const processes = fleet.actors.flatMap((actor) => actor.processes.map((p) => ({ actor: actor.name, ...p })));
  return (
    <div class="grid">
      <ErrorNote error={error} />
      <Section title="Summary">
        <dl class="facts">
          <dt>Gathered</dt>
          <dd>{formatTime(fleet.time)}</dd>
          <dt>Actor kinds</dt>
          <dd>{fleet.actors.length}</dd>
          <dt>Processes up</dt>
          <dd>{processes.filter((p) => p.state === "up").length}</dd>
          <dt>Dead letters</dt>
          <dd data-testid="dead-letters">{fleet.notifications.deadLetters}</dd>
          <dt>Paused subscriptions</dt>
          <dd>{fleet.notifications.pausedSubscriptions}</dd>
          <dt>Content tasks queued</dt>
          <dd>{fleet.content.tasksQueued}</dd>
          <dt>KV buckets</dt>
          <dd>
            {fleet.buckets.count} ({formatNumber(fleet.buckets.bytes / 1024)} KiB)
          </dd>
        </dl>
      </Section>
      <Section title="Actors" wide>
        <Table
          caption="Actor processes and their load"
          head={["actor", "process", "state", "host / pid", "uptime", "requests", "errors", "avg ms", "in flight", "queued"]}
        >
          {processes.map((p) => (
            <tr key={`${p.actor}-${p.id}`} class={p.state === "gone" ? "gone" : undefined}>
              <th scope="row">{p.actor}</th>
              <td title={p.id}>{p.id.slice(-8)}</td>
              <td>{p.state}</td>
              <td>
                {p.host ?? "—"} / {p.pid ?? "—"}
              </td>
              <td>{formatNumber(p.uptimeSeconds, 4)} s</td>
              <td>{p.requests}</td>
              <td>{p.errors}</td>
              <td>{formatNumber(p.averageProcessingMs)}</td>
              <td>{p.inflight}</td>
              <td>{p.queued}</td>
            </tr>
          ))}
        </Table>
      </Section>
      <Section title="Streams and consumers">
        <Table
          caption="Streams with their durable consumers"
          head={["stream", "messages", "bytes", "consumer", "pending", "ack pending", "redelivered"]}
        >
          {fleet.streams.flatMap((stream) =>
            (stream.consumers.length ? stream.consumers : [undefined]).map((consumer, i) => (
              <tr key={`${stream.name}-${consumer?.name ?? ""}`}>
                <th scope="row">{i === 0 ? stream.name : ""}</th>
                <td>{i === 0 ? stream.messages : ""}</td>
                <td>{i === 0 ? stream.bytes : ""}</td>
                <td>{consumer?.name ?? "—"}</td>
                <td>{consumer?.pending ?? "—"}</td>
                <td>{consumer?.ackPending ?? "—"}</td>
                <td>{consumer?.redelivered ?? "—"}</td>
              </tr>
            )),
          )}
        </Table>
      </Section>
      <Section title="Search replicas">
        <Table caption="Each search replica's applied sequence and lag" head={["replica", "applied", "lag (records)"]}>
          {fleet.search.replicas.map((r) => (
            <tr key={r.id}>
              <th scope="row">{r.id.slice(-8)}</th>
              <td>{r.appliedSeq}</td>
              <td>{r.lagRecords}</td>
            </tr>
          ))}
        </Table>
      </Section>
    </div>
  );
}
