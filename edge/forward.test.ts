import { describe, expect, it } from "vitest";
import { acceptsGzip } from "./forward.ts";

describe("content coding", () => {
  it("gzip is sent only to clients whose Accept-Encoding takes it (q=0 refuses it; * stands for it)", () => {
    for (const header of ["gzip", "br, gzip;q=0.5", "GZIP", "*", "br, *;q=0.1", "x-gzip"]) expect(acceptsGzip(header), header).toBe(true);
    for (const header of [null, "", "br", "gzip;q=0", "gzip; q=0.000", "identity", "*;q=0", "br, gzip;q=0, *"])
      expect(acceptsGzip(header), String(header)).toBe(false);
  });
});
