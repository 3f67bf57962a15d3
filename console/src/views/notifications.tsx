/**
 * Notifications: the client's subscriptions; per subscription its delivery attempts, its dead letters
 * with a replay button, its signing secret (reveal, rotate); publishing a test event.
 */
import { useState } from "preact/hooks";
import type { DeliveryAttempt, NotificationType, Subscription } from "../../../subjects/notifications.ts";
import { notifications, type Session } from "../api.ts";
import { openDeadLetters } from "../model.ts";
import { ErrorNote, Field, Section, Select, Table, TextArea, formatNumber, formatTime, usePoll } from "../ui.tsx";

/** Every notification type, checked complete against the contract's union by the compiler. */
const TYPE_SET = {
  PublishData: true,
  ReviewStateChanged: true,
  PlanShared: true,
  ProjectCreated: true,
  MasterPlanChanged: true,
} satisfies Record<NotificationType, true>;
const TYPES = Object.keys(TYPE_SET) as NotificationType[];
const REFRESH_MS = 2_000;

export function NotificationsView({ session }: { session: Session }) {
  const [selected, setSelected] = useState<string>();
  const list = usePoll(() => notifications.list(session), 10_000, [session]);
  const subscriptions = list.value ?? [];
  const current = subscriptions.find((s) => s.subscription_id === selected);
  return (
    <div class="grid">
      <Section title="Subscriptions" wide>
        <ErrorNote error={list.error} />
        <Table caption="This client's subscriptions in the partition" head={["subscriber", "type", "callback", "updated"]}>
          {subscriptions.map((s) => (
            <tr key={s.subscription_id} class={s.subscription_id === selected ? "selected" : undefined}>
              <th scope="row">
                <button
                  type="button"
                  class="secondary"
                  onClick={() => setSelected(s.subscription_id)}
                  aria-label={`Open ${s.subscriber} ${s.subscription_type}`}
                >
                  {s.subscriber}
                </button>
              </th>
              <td>{s.subscription_type}</td>
              <td class="mono">{s.callback_uri}</td>
              <td>{formatTime(s.updated_at)}</td>
            </tr>
          ))}
        </Table>
        {subscriptions.length === 0 && !list.error ? <p class="hint">No subscriptions yet.</p> : null}
      </Section>
      <CreateSubscription session={session} onCreated={(s) => (setSelected(s.subscription_id), list.refresh())} />
      <PublishEvent session={session} />
      {current ? (
        <SubscriptionDetail
          key={current.subscription_id}
          session={session}
          subscription={current}
          onDeleted={() => (setSelected(undefined), list.refresh())}
        />
      ) : null}
    </div>
  );
}

function CreateSubscription({ session, onCreated }: { session: Session; onCreated: (s: Subscription) => void }) {
  const [type, setType] = useState<string>(TYPES[0]!);
  const [subscriber, setSubscriber] = useState("");
  const [callback, setCallback] = useState("");
  const [error, setError] = useState<unknown>();
  const submit = async (event: Event) => {
    event.preventDefault();
    setError(undefined);
    try {
      onCreated(await notifications.upsert(session, type as NotificationType, { subscriber, callback_uri: callback }));
    } catch (failure) {
      setError(failure);
    }
  };
  return (
    <Section title="Create or update a subscription">
      <form class="row" onSubmit={submit}>
        <Select label="Type" value={type} options={TYPES} onValue={setType} />
        <Field label="Subscriber" value={subscriber} onValue={setSubscriber} required />
        <Field label="Callback URI" value={callback} onValue={setCallback} placeholder="https://…" required />
        <button type="submit">Subscribe</button>
      </form>
      <ErrorNote error={error} />
    </Section>
  );
}

function PublishEvent({ session }: { session: Session }) {
  const [type, setType] = useState<string>(TYPES[0]!);
  const [data, setData] = useState('{"well": "F-21", "depth": 3550}');
  const [error, setError] = useState<unknown>();
  const [published, setPublished] = useState<string>();
  const submit = async (event: Event) => {
    event.preventDefault();
    setError(undefined);
    setPublished(undefined);
    try {
      const accepted = await notifications.publish(session, type as NotificationType, { data: JSON.parse(data) });
      setPublished(accepted.event_id);
    } catch (failure) {
      setError(failure);
    }
  };
  return (
    <Section title="Publish a test event">
      <form class="row" onSubmit={submit}>
        <Select label="Event type" value={type} options={TYPES} onValue={setType} />
        <TextArea label="Data (JSON)" value={data} onValue={setData} rows={3} />
        <button type="submit">Publish</button>
      </form>
      {published ? (
        <p class="note" role="status">
          Published event <code>{published}</code>
        </p>
      ) : null}
      <ErrorNote error={error} />
    </Section>
  );
}

function SubscriptionDetail({ session, subscription, onDeleted }: { session: Session; subscription: Subscription; onDeleted: () => void }) {
  const id = subscription.subscription_id;
  const deliveries = usePoll(() => notifications.deliveries(session, id), REFRESH_MS, [session, id]);
  const [secret, setSecret] = useState<string>();
  const [error, setError] = useState<unknown>();
  const [note, setNote] = useState<string>();
  const act = async (what: () => Promise<void>) => {
    setError(undefined);
    setNote(undefined);
    try {
      await what();
    } catch (failure) {
      setError(failure);
    }
  };
  const replay = (eventId: string) =>
    act(async () => {
      await notifications.replay(session, id, eventId);
      setNote(`Replay of ${eventId} accepted`);
      deliveries.refresh();
    });
  const attempts = deliveries.value?.deliveries ?? [];
  const dead = openDeadLetters(attempts);
  return (
    <Section
      title={`Subscription ${subscription.subscriber}`}
      wide
      actions={
        <div class="row">
          <button type="button" class="secondary" onClick={() => act(async () => setSecret((await notifications.secret(session, id)).key))}>
            Reveal secret
          </button>
          <button type="button" class="secondary" onClick={() => act(async () => setSecret((await notifications.rotate(session, id)).key))}>
            Rotate secret
          </button>
          <button type="button" class="secondary" onClick={() => act(async () => (await notifications.remove(session, id), onDeleted()))}>
            Delete
          </button>
        </div>
      }
    >
      <dl class="facts">
        <dt>Id</dt>
        <dd class="mono">{id}</dd>
        <dt>Type</dt>
        <dd>{subscription.subscription_type}</dd>
        <dt>Callback</dt>
        <dd class="mono">{subscription.callback_uri}</dd>
        {secret ? (
          <>
            <dt>Signing secret</dt>
            <dd>
              <output class="mono" aria-label="Signing secret">
                {secret}
              </output>
            </dd>
          </>
        ) : null}
      </dl>
      {note ? (
        <p class="note" role="status">
          {note}
        </p>
      ) : null}
      <ErrorNote error={error ?? deliveries.error} />
      <h3>Dead letters</h3>
      {dead.length === 0 ? <p class="hint">None.</p> : null}
      {dead.length ? (
        <Table
          caption="Deliveries that exhausted their attempts, until a replay succeeds"
          head={["event", "", "attempts", "last error", "at"]}
        >
          {dead.map((d) => (
            <tr key={d.event_id}>
              <th scope="row" class="mono">
                {d.event_id}
              </th>
              <td>
                <button type="button" onClick={() => replay(d.event_id)} aria-label={`Replay ${d.event_id}`}>
                  Replay
                </button>
              </td>
              <td>{d.attempt}</td>
              <td>{d.status_code ?? d.error ?? "—"}</td>
              <td>{formatTime(d.attempted_at)}</td>
            </tr>
          ))}
        </Table>
      ) : null}
      <h3>Delivery attempts</h3>
      <Table caption="Delivery attempts, newest first" head={["event", "attempt", "state", "code", "duration", "time", "next attempt", ""]}>
        {attempts.map((a: DeliveryAttempt) => (
          <tr key={`${a.event_id}-${a.attempt}-${a.state}`}>
            <th scope="row" class="mono">
              {a.event_id}
            </th>
            <td>{a.attempt}</td>
            <td class={`state-${a.state}`}>{a.state}</td>
            <td>{a.status_code ?? (a.error ? <span title={a.error}>error</span> : "—")}</td>
            <td>{a.duration_ms === undefined ? "—" : `${formatNumber(a.duration_ms)} ms`}</td>
            <td>{formatTime(a.attempted_at)}</td>
            <td>{formatTime(a.next_attempt_at)}</td>
            <td>
              {a.state === "failed" || a.state === "dead" ? (
                <button
                  type="button"
                  class="secondary"
                  onClick={() => replay(a.event_id)}
                  aria-label={`Retry ${a.event_id} attempt ${a.attempt}`}
                >
                  Retry
                </button>
              ) : null}
            </td>
          </tr>
        ))}
      </Table>
      {attempts.length === 0 ? <p class="hint">No attempts yet.</p> : null}
    </Section>
  );
}
