/**
 * Content tasks of a project: open the project, see its tasks of the last 7 days newest first (a page at a time,
 * from GET /v2/projects/{projectId}/tasks), request its display items' or key parameters' content, and follow each
 * task through its states to its expiry. A task no longer on the list (older than its newest 1000) is looked up by id.
 */
import { useEffect, useState } from "preact/hooks";
import type { CatalogKind, Project, Task } from "../../../subjects/projects.ts";
import { type Session, projects } from "../api.ts";
import { expiryText, mergeTasks } from "../model.ts";
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
  /** The `before` of the next older page; absent once the oldest task is shown. */
  const [olderBefore, setOlderBefore] = useState<string>();
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
  const track = (...fresh: Task[]) => setTasks((known) => mergeTasks(known, fresh));
  const open = async () => {
    const opened = await projects.get(session, projectId);
    const page = await projects.tasks(session, opened.projectId);
    setProject(opened);
    setTasks(page.items);
    setOlderBefore(page.nextBefore);
  };
  const older = async () => {
    if (!project || !olderBefore) return;
    const page = await projects.tasks(session, project.projectId, olderBefore);
    track(...page.items);
    setOlderBefore(page.nextBefore);
  };

  // Every second the newest page is read again (it shows tasks requested elsewhere too) and each unfinished task
  // beyond it by id; the clock also moves the expiry countdowns.
  useEffect(() => {
    if (!project) return;
    // A read still in flight when another project was opened must not add its tasks to that one's.
    let current = true;
    const timer = setInterval(async () => {
      setNow(Date.now());
      const newest = await projects.tasks(session, project.projectId).catch(() => undefined);
      const listed = new Set(newest?.items.map((t) => t.taskId));
      const unfinished = tasks.filter((t) => !finished(t) && !listed.has(t.taskId));
      const single = await Promise.all(unfinished.map((t) => projects.task(session, t.projectId, t.taskId).catch(() => undefined)));
      if (current) track(...(newest?.items ?? []), ...single.filter((t) => t !== undefined));
    }, REFRESH_MS);
    return () => {
      current = false;
      clearInterval(timer);
    };
  }, [tasks, session, project]);

  return (
    <div class="grid">
      <Section title="Project" wide>
        <form class="row" onSubmit={(event) => (event.preventDefault(), attempt(open))}>
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
          caption="Content tasks of the project, newest first"
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
        {project && tasks.length === 0 ? <p class="hint">No tasks in the last 7 days: request content of the project.</p> : null}
        {!project ? <p class="hint">Open a project to see its tasks.</p> : null}
        {olderBefore ? (
          <button type="button" onClick={() => attempt(older)}>
            Older tasks
          </button>
        ) : null}
      </Section>
    </div>
  );
}
