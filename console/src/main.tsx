/**
 * The console: sign in, then one view per capability. The view is named in the URL's fragment
 * (#fleet, #notifications …) so a view can be linked; the session is held in memory only, so a
 * reload asks to sign in again.
 */
import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { type Session, settings, signIn, whoami } from "./api.ts";
import { ContentView } from "./views/content.tsx";
import { FleetView } from "./views/fleet.tsx";
import { NotificationsView } from "./views/notifications.tsx";
import { ReportingView } from "./views/reporting.tsx";
import { SearchView } from "./views/search.tsx";
import { TwinsView } from "./views/twins.tsx";
import { ErrorNote, Field, Select } from "./ui.tsx";

const VIEWS = {
  fleet: { title: "Fleet", View: FleetView },
  notifications: { title: "Notifications", View: NotificationsView },
  twins: { title: "Twins", View: TwinsView },
  search: { title: "Search", View: SearchView },
  reporting: { title: "Reporting", View: ReportingView },
  content: { title: "Content tasks", View: ContentView },
} as const;
type ViewName = keyof typeof VIEWS;
const isView = (name: string): name is ViewName => name in VIEWS;
const viewOfHash = (): ViewName => {
  const name = location.hash.slice(1);
  return isView(name) ? name : "fleet";
};

function SignIn({ onSession }: { onSession: (session: Session) => void }) {
  const [partitions, setPartitions] = useState<string[]>([]);
  const [partition, setPartition] = useState("");
  const [mode, setMode] = useState<"client" | "token">("client");
  const [clientId, setClientId] = useState("");
  const [clientSecret, setClientSecret] = useState("");
  const [token, setToken] = useState("");
  const [appkey, setAppkey] = useState("");
  const [error, setError] = useState<unknown>();
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    settings()
      .then((s) => (setPartitions(s.partitions), setPartition(s.partitions[0] ?? "")))
      .catch(setError);
  }, []);
  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(undefined);
    try {
      // The secret goes to /v2/token once and is dropped with this form; only the token is kept.
      const bearer = mode === "client" ? (await signIn(clientId, clientSecret)).access_token : token.trim();
      const session: Session = { token: bearer, appkey: appkey.trim(), partition };
      const me = await whoami(session);
      setClientSecret("");
      // whoami checks the token, the appkey and the partition together before any view opens.
      onSession({ ...session, clientId: me.principal.clientId });
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="signin">
      <h1>derrick console</h1>
      <form onSubmit={submit} class="card" aria-label="Sign in">
        <fieldset class="modes">
          <legend>Sign in with</legend>
          <label>
            <input type="radio" name="mode" checked={mode === "client"} onChange={() => setMode("client")} /> client credentials
          </label>
          <label>
            <input type="radio" name="mode" checked={mode === "token"} onChange={() => setMode("token")} /> a bearer token
          </label>
        </fieldset>
        {mode === "client" ? (
          <>
            <Field label="Client ID" value={clientId} onValue={setClientId} autoComplete="username" required />
            <Field label="Client secret" value={clientSecret} onValue={setClientSecret} type="password" autoComplete="off" required />
          </>
        ) : (
          <Field label="Bearer token" value={token} onValue={setToken} autoComplete="off" required />
        )}
        <Field label="Appkey" value={appkey} onValue={setAppkey} autoComplete="off" required />
        <Select label="Partition" value={partition} options={partitions} onValue={setPartition} />
        <button type="submit" disabled={busy}>
          Sign in
        </button>
        <ErrorNote error={error} />
      </form>
      <p class="hint">The token is kept in this page's memory only; the secret is never stored.</p>
    </main>
  );
}

function Console({ session, onSignOut }: { session: Session; onSignOut: () => void }) {
  const [view, setView] = useState<ViewName>(viewOfHash);
  useEffect(() => {
    const follow = () => setView(viewOfHash());
    addEventListener("hashchange", follow);
    return () => removeEventListener("hashchange", follow);
  }, []);
  const { title, View } = VIEWS[view];
  return (
    <>
      <header class="top">
        <h1>derrick console</h1>
        <p class="who">
          <span>{session.clientId}</span> · <span>{session.partition}</span>
          <button type="button" class="link" onClick={onSignOut}>
            Sign out
          </button>
        </p>
        <nav aria-label="Views">
          {(Object.keys(VIEWS) as ViewName[]).map((name) => (
            <a key={name} href={`#${name}`} aria-current={name === view ? "page" : undefined}>
              {VIEWS[name].title}
            </a>
          ))}
        </nav>
      </header>
      <main aria-label={title}>
        <View session={session} />
      </main>
    </>
  );
}

function App() {
  const [session, setSession] = useState<Session>();
  return session ? <Console session={session} onSignOut={() => setSession(undefined)} /> : <SignIn onSession={setSession} />;
}

const root = document.getElementById("app");
if (root) render(<App />, root);
