import { describe, expect, it } from "vitest";
import { childContext, formatTraceparent, parseTraceparent } from "./trace-context.ts";

const VALID = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

describe("trace context", () => {
  it("trace context - a valid traceparent is read with its tracestate; the next hop keeps the trace id and gets its own span id", () => {
    const parent = parseTraceparent(VALID, "congo=t61rcWkgMzE");
    expect(parent).toEqual({
      traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
      spanId: "00f067aa0ba902b7",
      flags: "01",
      state: "congo=t61rcWkgMzE",
    });
    const child = childContext(parent);
    expect(child.traceId).toBe(parent!.traceId);
    expect(child.spanId).toMatch(/^[0-9a-f]{16}$/);
    expect(child.spanId).not.toBe(parent!.spanId);
    expect(formatTraceparent(child)).toMatch(/^00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-01$/);
    expect(child.state).toBe("congo=t61rcWkgMzE");
  });

  it.each([
    ["absent", undefined],
    ["upper case", VALID.toUpperCase()],
    ["version ff", VALID.replace(/^00/, "ff")],
    ["all-zero trace id", `00-${"0".repeat(32)}-00f067aa0ba902b7-01`],
    ["all-zero span id", `00-4bf92f3577b34da6a3ce929d0e0e4736-${"0".repeat(16)}-01`],
    ["short trace id", "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01"],
    ["version 00 with an extra field", `${VALID}-extra`],
  ])("trace context - %s is no trace context (a new trace starts)", (_, header) => {
    expect(parseTraceparent(header)).toBeUndefined();
    const started = childContext(parseTraceparent(header));
    expect(formatTraceparent(started)).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
  });

  it("trace context - a later version's extra fields are ignored; an oversized or non-ASCII tracestate is dropped", () => {
    expect(parseTraceparent(`01${VALID.slice(2)}-whatever`)?.traceId).toBe("4bf92f3577b34da6a3ce929d0e0e4736");
    expect(parseTraceparent(VALID, "a=".padEnd(600, "b"))?.state).toBeUndefined();
    expect(parseTraceparent(VALID, "a=\u00e9")?.state).toBeUndefined();
  });
});
