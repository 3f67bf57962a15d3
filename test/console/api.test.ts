/** How the console words the API's refusals for its user. */
import { describe, expect, it } from "vitest";
import { ApiError, explain } from "../../console/src/api.ts";

const refusal = (status: number, problem: object) => new ApiError(status, { status, ...problem }, new Headers());

describe("console api", () => {
  it("explain - a 403 passes on the group the edge names; a 400 names each field at fault", () => {
    expect(explain(refusal(403, { detail: "needs group derrick.operators" }))).toContain("needs group derrick.operators");
    expect(
      explain(
        refusal(400, { detail: "invalid body", errors: [{ pointer: "/body/callback_uri", message: "must be an absolute http(s) URI" }] }),
      ),
    ).toBe("400: invalid body (/body/callback_uri must be an absolute http(s) URI)");
    expect(explain(refusal(502, { detail: "<html>bad gateway</html>" }))).toBe("502: <html>bad gateway</html>");
    expect(explain(new TypeError("Failed to fetch"))).toBe("Failed to fetch");
  });
});
