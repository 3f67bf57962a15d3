/**
 * Content tasks of a project: open the project, request its display items' or key parameters' content,
 * and follow each task (requested here or looked up by id) through its states to its expiry. The API
 * reads a task by id only (no list of a project's tasks), so the view lists the tasks it knows.
 */
import { useEffect, useState } from "preact/hooks";
import type { CatalogKind, Project, Task } from "../../../subjects/projects.ts";
import { type Session, projects } from "../api.ts";
import { expiryText } from "../model.ts";
import { ErrorNote, Field, Section, Select, Table, formatTime } from "../ui.tsx";

const KINDS = ["display-items", "key-parameters"] as const satisfies readonly CatalogKind[];
const REFRESH_MS = 1_000;
const finished = (task: Task) => task.state === "succeeded" || task.state === "failed";

export function ContentView({ session }: { session: Session }) {
  const [projectId, setProjectId] = useState("");
  const [project, setProject] = useState<Project>();
  const [kind, setKind] = useState<string>(KINDS[0]);
  const [ids, setIds] = useState("");
  const [lookup, setLookup] = useState("");
  const [tasks, setTasks] = useState<Task[]>([]);
  const [error, setError] = useState<unknown>();
  const [now, setNow] = useState(Date.now());
  const attempt = async (what: () => Promise<void>) => {
    setError(undefined);
    try {
      await what();
    } catch (failure) {
      setError(failure);
    }
  };
  const track = (task: Task) => setTasks((known) => [task, ...known.filter((t) => t.taskId !== task.taskId)]);

  // Unfinished tasks are read again every second; the clock also moves the expiry countdowns.
  useEffect(() => {
    const timer = setInterval(async () => {
      setNow(Date.now());
      const open = tasks.filter((t) => !finished(t));
      for (const task of open) {
        const next = await projects.task(session, task.projectId, task.taskId).catch(() => undefined);
        if (next) track(next);
      }
    }, REFRESH_MS);
    return () => clearInterval(timer);
  }, [tasks, session]);

  return (
    <div class="grid">
      <Section title="Project" wide>
        <form
          class="row"
          onSubmit={(event) => (event.preventDefault(), attempt(async () => setProject(await projects.get(session, projectId))))}
        >
          <Field label="Project id" value={projectId} onValue={setProjectId} required />
          <button type="submit">Open project</button>
        </form>
        <ErrorNote error={error} />
        {project ? (
          <dl class="facts">
            <dt>Name</dt>
            <dd>{project.name}</dd>
            <dt>Members</dt>
            <dd>{project.members.join(", ")}</dd>
            <dt>Values</dt>
            <dd>
              {Object.keys(project.values.displayItems).length} display items, {Object.keys(project.values.keyParameters).length} key
              parameters
            </dd>
            <dt>Updated</dt>
            <dd>{formatTime(project.updatedAt)}</dd>
          </dl>
        ) : null}
      </Section>
      {project ? (
        <Section title="Request content">
          <form
            class="row"
            onSubmit={(event) => {
              event.preventDefault();
              void attempt(async () => {
                const list = ids
                  .split(",")
                  .map((id) => id.trim())
                  .filter(Boolean);
                const accepted = await projects.requestContent(session, project.projectId, kind as CatalogKind, list);
                track(await projects.task(session, project.projectId, accepted.taskId));
              });
            }}
          >
            <Select label="Content of" value={kind} options={KINDS} onValue={setKind} />
            <Field label="Item ids (optional)" value={ids} onValue={setIds} placeholder="well-name, water-depth" />
            <button type="submit">Request content</button>
          </form>
        </Section>
      ) : null}
      {project ? (
        <Section title="Look up a task">
          <form
            class="row"
            onSubmit={(event) => (
              event.preventDefault(), attempt(async () => track(await projects.task(session, project.projectId, lookup)))
            )}
          >
            <Field label="Task id" value={lookup} onValue={setLookup} required />
            <button type="submit">Look up</button>
          </form>
        </Section>
      ) : null}
      <Section title="Tasks" wide>
        <Table
          caption="Content tasks requested or looked up here"
          head={["task", "project", "content of", "state", "created", "completed", "expiry", "content id"]}
        >
          {tasks.map((task) => (
            <tr key={task.taskId}>
              <th scope="row" class="mono">
                {task.taskId}
              </th>
              <td>{task.projectId}</td>
              <td>{task.kind}</td>
              <td class={`state-${task.state}`} title={task.error}>
                {task.state}
                {task.error ? `: ${task.error}` : ""}
              </td>
              <td>{formatTime(task.createdAt)}</td>
              <td>{formatTime(task.completedAt)}</td>
              <td>{expiryText(task.expiresAt, now)}</td>
              <td class="mono">{task.contentId ?? "—"}</td>
            </tr>
          ))}
        </Table>
        {tasks.length === 0 ? <p class="hint">No tasks yet: request content of the project, or look a task up by its id.</p> : null}
      </Section>
    </div>
  );
}
