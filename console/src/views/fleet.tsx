/** Fleet (group derrick.operators): actor kinds and processes with their load, streams and consumers, replica lag, dead letters. */
import { useMemo, useRef } from "preact/hooks";
import type uPlot from "uplot";
import { fleetStatus, type Session } from "../api.ts";
import { Chart, colour } from "../charts.tsx";
import { type LoadSample, loadSample, requestRates } from "../model.ts";
import { ErrorNote, Section, Table, formatNumber, formatTime, usePoll } from "../ui.tsx";

const REFRESH_MS = 2_000;
/** Two minutes of looks at the fleet. */
const HISTORY = 60;

export function FleetView({ session }: { session: Session }) {
  const { value: fleet, error } = usePoll(() => fleetStatus(session), REFRESH_MS, [session]);
  const history = useRef<LoadSample[]>([]);
  if (fleet && history.current.at(-1)?.time !== loadSample(fleet).time)
    history.current = [...history.current, loadSample(fleet)].slice(-HISTORY);
  const samples = history.current;
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
          <dt>Content tasks running</dt>
          <dd>{fleet.content.tasksRunning}</dd>
          <dt>KV buckets</dt>
          <dd>
            {fleet.buckets.count} ({formatNumber(fleet.buckets.bytes / 1024)} KiB)
          </dd>
        </dl>
      </Section>
      <Section title="Load">
        <LoadChart samples={samples} />
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

const utcClock = (seconds: number) => `${new Date(seconds * 1000).toISOString().slice(11, 19)}Z`;

/** Requests per second of the busiest actors over the last looks (drawn once two rates, three looks, are in). */
function LoadChart({ samples }: { samples: readonly LoadSample[] }) {
  const { options, data, names } = useMemo(() => {
    const { times, series } = requestRates(samples);
    const options: Omit<uPlot.Options, "width" | "height"> = {
      // The window is the last two minutes, however few looks are in yet.
      scales: {
        x: { time: true, range: (_u: uPlot, _min: number, max: number) => [max - HISTORY * (REFRESH_MS / 1000), max + 1] },
        y: { range: (_u: uPlot, _min: number, max: number) => [0, Math.max(1, max * 1.1)] },
      },
      // UTC clock times, as every time in the console.
      axes: [{ space: 90, values: (_u: uPlot, splits: number[]) => splits.map(utcClock) }, { label: "requests / s" }],
      series: [
        { value: (_u: uPlot, v: number | null) => (v === null ? "—" : utcClock(v)) },
        ...series.map((s, i) => ({ label: s.name, stroke: colour(i), width: 2 })),
      ],
    };
    return { options, data: [times, ...series.map((s) => s.rates)] as uPlot.AlignedData, names: series.map((s) => s.name) };
  }, [samples]);
  if (samples.length < 3) return <p class="hint">Requests per second appear from the third look on.</p>;
  if (names.length === 0) return <p class="hint">No requests in the last {samples.length} looks.</p>;
  return <Chart label={`Requests per second of ${names.join(", ")} over the last ${samples.length} looks`} options={options} data={data} />;
}
