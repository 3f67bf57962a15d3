import { describe, expect } from "vitest";
import { spawn } from "node:child_process";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { TestDerrick, TestNats } from "../harness/index.ts";
import { json } from "../harness/json.ts";
import { reportingTest } from "./helpers.ts";

const CLI = join(fileURLToPath(new URL("../..", import.meta.url)), "bin", "derrick.ts");

const it = reportingTest();

describe("derrick seed", () => {
  /** Runs the CLI without blocking this process: the actor answering it lives here. */
  const seed = ({ nats, derrick }: { nats: TestNats; derrick: TestDerrick }, ...args: string[]) =>
    new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, [CLI, "seed", ...args], {
        env: {
          ...process.env,
          NATS_URL: nats.url,
          DERRICK_PARTITIONS: "opendes,other",
          DERRICK_DATA_DIR: derrick.dataDir,
          DERRICK_LOG_LEVEL: "silent",
        },
        stdio: ["ignore", "pipe", "pipe"],
        timeout: 30_000,
      });
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (d) => (stdout += d));
      child.stderr.on("data", (d) => (stderr += d));
      child.on("close", (status) => resolve({ status, stdout, stderr }));
    });

  it("seed - loads the demo set over NATS: a license with two versions, three segments, a full cycle and a two-scenario analysis", async ({
    derrick,
    nats,
  }) => {
    const out = await seed({ nats, derrick });
    expect(out.status, out.stderr).toBe(0);
    expect(out.stdout).toContain("201 PUT /assessments/v1/licenses/pl-123");
    expect(out.stdout).toContain("200 PUT /assessments/v1/licenses/pl-123");
    const license = await json(await derrick.call("/assessments/v1/licenseaggregation/pl-123"));
    expect(license.versions).toHaveLength(2);
    const prospect = await json(await derrick.call("/assessments/v1/prospectanalysisaggregation/pa-alpha-oil"));
    expect(prospect.segments).toHaveLength(3);
    const fc = await json(
      await derrick.call("/assessments/v1/fullcycleanalysisaggregation", {
        method: "POST",
        body: JSON.stringify({ prospectAnalysisId: "pa-alpha-oil" }),
      }),
    );
    expect(fc.fullCycleAnalyses).toHaveLength(1);
    const msa = await json(await derrick.call("/assessments/v1/prospectmultiplescenarioanalysisaggregation/msa-alpha"));
    expect(msa.results.byScenario).toHaveLength(2);
    // Seeding again replaces (200) and the license still holds both versions.
    const again = await seed({ nats, derrick }, "--partition", "opendes");
    expect(again.status, again.stderr).toBe(0);
    expect(again.stdout).not.toContain("201 PUT");
    expect((await json(await derrick.call("/assessments/v1/licenses/pl-123"))).versions).toHaveLength(2);
  });

  it("seed - a partition that is not served is refused", async ({ derrick, nats }) => {
    const out = await seed({ nats, derrick }, "--partition", "nowhere");
    expect(out.status).toBe(2);
    expect(out.stderr).toContain("nowhere");
  });
});
