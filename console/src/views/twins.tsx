/**
 * Twins: open a twin by organization, environment and id; its groups with desired and reported values,
 * versions and times; edit a group's desired values with If-Match, so a write that lost a race is
 * shown as a conflict (412) with the edits kept, never applied over the other writer's values.
 */
import { useEffect, useState } from "preact/hooks";
import type { TwinGetReply } from "../../../subjects/twins.ts";
import { ApiError, type Session, type TwinAddress, twins } from "../api.ts";
import { twinRows } from "../model.ts";
import { ErrorNote, Field, Section, Table, formatTime } from "../ui.tsx";

export function TwinsView({ session }: { session: Session }) {
  const [address, setAddress] = useState<TwinAddress>({ organization: "acme", environment: "prod", twinId: "" });
  const [opened, setOpened] = useState<{ address: TwinAddress; twin: TwinGetReply }>();
  const [editing, setEditing] = useState<string>();
  const [error, setError] = useState<unknown>();
  const open = async (at: TwinAddress) => {
    setError(undefined);
    try {
      setOpened({ address: at, twin: (await twins.get(session, at)).twin });
    } catch (failure) {
      setError(failure);
    }
  };
  const groups = opened ? [...new Set([...Object.keys(opened.twin.desired), ...Object.keys(opened.twin.reported)])].sort() : [];
  return (
    <div class="grid">
      <Section title="Open a twin" wide>
        <form
          class="row"
          onSubmit={(event) => {
            event.preventDefault();
            setEditing(undefined);
            void open(address);
          }}
        >
          <Field
            label="Organization"
            value={address.organization}
            onValue={(organization) => setAddress({ ...address, organization })}
            required
          />
          <Field
            label="Environment"
            value={address.environment}
            onValue={(environment) => setAddress({ ...address, environment })}
            required
          />
          <Field label="Twin id" value={address.twinId} onValue={(twinId) => setAddress({ ...address, twinId })} required />
          <button type="submit">Open</button>
        </form>
        <ErrorNote error={error} />
        {opened && groups.length === 0 ? <p class="hint">Nothing stored for this twin yet.</p> : null}
      </Section>
      {opened
        ? groups.map((group) =>
            editing === group ? (
              <EditGroup
                key={`edit-${group}`}
                session={session}
                address={opened.address}
                group={group}
                onDone={() => (setEditing(undefined), void open(opened.address))}
              />
            ) : (
              <Section
                key={group}
                title={`Group ${group}`}
                actions={
                  <button type="button" class="secondary" onClick={() => setEditing(group)}>
                    Edit desired values of {group}
                  </button>
                }
              >
                <Table
                  caption={`Desired and reported values of ${group}`}
                  head={["name", "desired", "v", "updated", "reported", "v", "updated"]}
                >
                  {twinRows(opened.twin, group).map((row) => (
                    <tr key={row.name}>
                      <th scope="row">{row.name}</th>
                      <td class="mono">{row.desired?.value ?? "—"}</td>
                      <td>{row.desired?.version ?? "—"}</td>
                      <td>{formatTime(row.desired?.updated_at)}</td>
                      <td class="mono">{row.reported?.value ?? "—"}</td>
                      <td>{row.reported?.version ?? "—"}</td>
                      <td>{formatTime(row.reported?.updated_at)}</td>
                    </tr>
                  ))}
                </Table>
              </Section>
            ),
          )
        : null}
    </div>
  );
}

type Draft = { name: string; value: string };

function EditGroup({ session, address, group, onDone }: { session: Session; address: TwinAddress; group: string; onDone: () => void }) {
  const [etag, setEtag] = useState<string>();
  const [drafts, setDrafts] = useState<Draft[]>();
  const [error, setError] = useState<unknown>();
  const [conflict, setConflict] = useState(false);
  const load = async () => {
    setError(undefined);
    setConflict(false);
    try {
      const { twin, etag } = await twins.get(session, address, group);
      setEtag(etag);
      setDrafts(Object.entries(twin.desired[group] ?? {}).map(([name, v]) => ({ name, value: v.value })));
    } catch (failure) {
      setError(failure);
    }
  };
  // Loaded once when the editor opens: the ETag read here is what the save is conditional on.
  useEffect(() => void load(), []);
  const save = async (event: Event) => {
    event.preventDefault();
    setError(undefined);
    try {
      await twins.put(session, address, { group, twins: (drafts ?? []).filter((d) => d.name) }, etag);
      onDone();
    } catch (failure) {
      if (failure instanceof ApiError && failure.status === 412) setConflict(true);
      else setError(failure);
    }
  };
  const change = (index: number, draft: Draft) => setDrafts((drafts ?? []).map((d, i) => (i === index ? draft : d)));
  return (
    <Section title={`Edit desired values of ${group}`}>
      <form onSubmit={save}>
        <p class="hint">Written with If-Match {etag ?? "(none)"}: a change by someone else since then is refused, not overwritten.</p>
        {(drafts ?? []).map((draft, index) => (
          <div class="row" key={index}>
            <Field label={`Name ${index + 1}`} value={draft.name} onValue={(name) => change(index, { ...draft, name })} />
            <Field
              label={`Value of ${draft.name || index + 1}`}
              value={draft.value}
              onValue={(value) => change(index, { ...draft, value })}
            />
          </div>
        ))}
        {conflict ? (
          <div class="error" role="alert">
            Conflict (412): the desired values of {group} changed since they were loaded. Your edits are kept here; reload to see the
            current values, then apply your edits again.
            <div class="row">
              <button type="button" class="secondary" onClick={load}>
                Reload current values
              </button>
            </div>
          </div>
        ) : null}
        <ErrorNote error={error} />
        <div class="row">
          <button type="button" class="secondary" onClick={() => setDrafts([...(drafts ?? []), { name: "", value: "" }])}>
            Add a property
          </button>
          <button type="submit">Save</button>
          <button type="button" class="secondary" onClick={onDone}>
            Cancel
          </button>
        </div>
      </form>
    </Section>
  );
}
