/** Shared fixtures of the projects tests and bench: a realistic drilling-plan project. */
import type { TestDerrick } from "../harness/index.ts";

/** A planned trajectory: build section from a kick-off point, `stations` survey stations every 30 m. */
export function plannedTrajectory(stations: number): Array<Record<string, number>> {
  const rows: Array<Record<string, number>> = [];
  let tvd = 0;
  let north = 0;
  let east = 0;
  for (let i = 0; i < stations; i++) {
    const md = i * 30;
    const inc = md < 600 ? 0 : Math.min(60, (md - 600) * 0.1);
    const azi = 45;
    const rad = (inc * Math.PI) / 180;
    if (i > 0) {
      tvd += 30 * Math.cos(rad);
      north += 30 * Math.sin(rad) * Math.cos((azi * Math.PI) / 180);
      east += 30 * Math.sin(rad) * Math.sin((azi * Math.PI) / 180);
    }
    rows.push({ md, inc, azi, tvd: Math.round(tvd * 100) / 100, north: Math.round(north * 100) / 100, east: Math.round(east * 100) / 100 });
  }
  return rows;
}

export function drillingPlanValues(stations = 120) {
  return {
    displayItems: {
      "well-name": "NO 15/9-F-21 A",
      "field-name": "Volve",
      "rig-name": "Maersk Inspirer",
      "water-depth": 91,
      "spud-date": "2026-03-01",
      "trajectory-survey": plannedTrajectory(stations),
      "casing-scheme": [
        { name: "Conductor", odIn: 30, topMd: 0, shoeMd: 200 },
        { name: "Surface", odIn: 20, topMd: 0, shoeMd: 1200 },
        { name: "Intermediate", odIn: 13.375, topMd: 0, shoeMd: 2600 },
        { name: "Production liner", odIn: 9.625, topMd: 2450, shoeMd: 3550 },
      ],
      "mud-program": [
        { section: "26in", type: "WBM", densitySg: 1.05 },
        { section: "17.5in", type: "WBM", densitySg: 1.3 },
        { section: "12.25in", type: "OBM", densitySg: 1.45 },
      ],
      currency: "USD",
    },
    keyParameters: {
      "total-depth-md": 3550,
      "total-depth-tvd": 3120.5,
      "max-inclination": 60,
      "casing-string-count": 4,
      "max-mud-weight": 1.45,
      "h2s-expected": false,
      "planned-days": 48.5,
      "total-cost": 38_500_000,
      "rig-release-date": "2026-04-18",
    },
  };
}

/** Creates (or replaces) a project as the admin client; members default to alpha. */
export async function putProject(derrick: TestDerrick, projectId: string, body: Record<string, unknown> = {}): Promise<Response> {
  return derrick.call(`/v1/projects/${projectId}`, {
    as: "admin",
    method: "PUT",
    body: JSON.stringify({ name: `Project ${projectId}`, members: ["alpha"], values: drillingPlanValues(), ...body }),
  });
}
