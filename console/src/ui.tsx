/** Small shared pieces of the console's views: labelled fields, errors, polling, number and time formats. */
import type { ComponentChildren } from "preact";
import { useEffect, useId, useRef, useState } from "preact/hooks";
import { explain } from "./api.ts";

type InputProps = {
  type?: "text" | "password" | "number";
  autoComplete?: string;
  required?: boolean;
  placeholder?: string;
  label: string;
  value: string;
  onValue: (value: string) => void;
};

/** An input with its visible label (the test and screen readers find fields by their label). */
export function Field({ label, value, onValue, type = "text", autoComplete, required, placeholder }: InputProps) {
  const id = useId();
  return (
    <div class="field">
      <label for={id}>{label}</label>
      <input
        id={id}
        // Preact's input types are a union per `type`; a union-typed `type` matches none of its members.
        type={type as "text"}
        value={value}
        autoComplete={autoComplete}
        required={required}
        placeholder={placeholder}
        step={type === "number" ? "any" : undefined}
        onInput={(event) => onValue(event.currentTarget.value)}
      />
    </div>
  );
}

export function Select({
  label,
  value,
  options,
  onValue,
}: {
  label: string;
  value: string;
  options: readonly string[];
  onValue: (v: string) => void;
}) {
  const id = useId();
  return (
    <div class="field">
      <label for={id}>{label}</label>
      <select id={id} value={value} onChange={(event) => onValue(event.currentTarget.value)}>
        {options.map((option) => (
          <option key={option} value={option}>
            {option}
          </option>
        ))}
      </select>
    </div>
  );
}

export function TextArea({
  label,
  value,
  onValue,
  rows = 4,
}: {
  label: string;
  value: string;
  onValue: (v: string) => void;
  rows?: number;
}) {
  const id = useId();
  return (
    <div class="field wide">
      <label for={id}>{label}</label>
      <textarea id={id} rows={rows} value={value} onInput={(event) => onValue(event.currentTarget.value)} />
    </div>
  );
}

/** An error as the user reads it, announced to screen readers. */
export function ErrorNote({ error }: { error: unknown }) {
  if (error === undefined || error === null) return null;
  return (
    <p class="error" role="alert">
      {explain(error)}
    </p>
  );
}

type SectionProps = { title: string; children: ComponentChildren; actions?: ComponentChildren; wide?: boolean };
/** A titled card; `wide` spans every column of the view's grid. */
export function Section({ title, children, actions, wide }: SectionProps) {
  return (
    <section class={wide ? "card span" : "card"} aria-label={title}>
      <header class="card-head">
        <h2>{title}</h2>
        {actions}
      </header>
      {children}
    </section>
  );
}

/** A table that scrolls sideways on a narrow screen instead of widening the page. */
export function Table({ caption, head, children }: { caption: string; head: readonly string[]; children: ComponentChildren }) {
  return (
    <div class="table-wrap">
      <table>
        <caption>{caption}</caption>
        <thead>
          <tr>
            {head.map((h) => (
              <th key={h} scope="col">
                {h}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>{children}</tbody>
      </table>
    </div>
  );
}

/**
 * Runs `load` now and every `everyMs` while mounted (and `enabled`), one at a time: a slow answer is
 * never overtaken by the next poll. Returns the latest value and error.
 */
export function usePoll<T>(load: () => Promise<T>, everyMs: number, deps: readonly unknown[], enabled = true) {
  const [value, setValue] = useState<T | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const loadRef = useRef(load);
  loadRef.current = load;
  const [tick, setTick] = useState(0);
  // The caller's deps decide when polling restarts.
  useEffect(() => {
    if (!enabled) return;
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const run = async () => {
      try {
        const next = await loadRef.current();
        if (!stopped) setValue(next), setError(undefined);
      } catch (failure) {
        if (!stopped) setError(failure);
      }
      if (!stopped) timer = setTimeout(run, everyMs);
    };
    void run();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [...deps, enabled, tick, everyMs]);
  return { value, error, refresh: () => setTick((n) => n + 1) };
}

export const formatTime = (iso: string | undefined) => (iso ? iso.replace("T", " ").replace(/\.\d+Z$/, "Z") : "—");
export const formatNumber = (value: unknown, digits = 3) =>
  typeof value === "number" && Number.isFinite(value)
    ? Number(value.toPrecision(digits)).toLocaleString("en")
    : value === null
      ? "—"
      : String(value ?? "—");
export const formatPercent = (value: unknown) => (typeof value === "number" ? `${(value * 100).toFixed(1)} %` : "—");
