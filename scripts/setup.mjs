#!/usr/bin/env node
// Makes a fresh machine ready before `npm start` / `npm test`: npm packages, then the system
// servers derrick runs (nats-server; redis-server for tests) from Debian's packages when missing.
// Plain Node on purpose: it runs before anything else is installed.
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, statSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { join } from "node:path";

const root = fileURLToPath(new URL("..", import.meta.url));
const forTests = process.argv.includes("--test");
const say = (msg) => console.error(`[setup] ${msg}`);

function onPath(cmd) {
  return spawnSync("sh", ["-c", `command -v ${cmd}`], { stdio: "ignore" }).status === 0;
}

function npmPackagesCurrent() {
  const marker = join(root, "node_modules", ".package-lock.json");
  if (!existsSync(marker) || !existsSync(join(root, "node_modules", ".bin", "bun"))) return false;
  const lock = join(root, "package-lock.json");
  return !existsSync(lock) || statSync(lock).mtimeMs <= statSync(marker).mtimeMs;
}

if (!npmPackagesCurrent()) {
  say("installing npm packages");
  execFileSync("npm", ["install", "--no-audit", "--no-fund"], { cwd: root, stdio: "inherit" });
}

const wanted = [];
if (forTests || !process.env.NATS_URL) wanted.push(["nats-server", "nats-server"]);
if (forTests) wanted.push(["redis-server", "redis-server"]);
// The metrics test scrapes derrick with a real Prometheus and checks the alert rules with promtool.
if (forTests) wanted.push(["prometheus", "prometheus"]);
const missing = wanted.filter(([cmd]) => !onPath(cmd));
const canApt = typeof process.getuid === "function" && process.getuid() === 0 && onPath("apt-get");
// The browser tests (/docs, /console) drive Debian's chromium; without it they are skipped, so it is
// installed where apt-get can, and only named where it cannot.
if (forTests && !existsSync("/usr/bin/chromium")) {
  if (canApt) missing.push(["chromium", "chromium"]);
  else say("/usr/bin/chromium is missing: the browser tests will be skipped (Debian/Ubuntu: sudo apt-get install chromium).");
}
if (missing.length) {
  const packages = missing.map(([, pkg]) => pkg);
  if (canApt) {
    say(`installing ${packages.join(", ")} with apt-get`);
    const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
    execFileSync("apt-get", ["update", "-qq"], { stdio: "inherit", env });
    execFileSync("apt-get", ["install", "-y", "-qq", "--no-install-recommends", ...packages], { stdio: "inherit", env });
  } else {
    say(`missing: ${packages.join(", ")}.`);
    say(`Install them (Debian/Ubuntu: sudo apt-get install ${packages.join(" ")}),`);
    if (!forTests) say("or set NATS_URL to an existing nats-server with JetStream enabled.");
    process.exit(1);
  }
}

const bun = spawnSync(join(root, "node_modules", ".bin", "bun"), ["--version"], { encoding: "utf8" });
if (bun.status !== 0) {
  say("the Bun runtime from the `bun` npm package does not run here; reinstall with `npm install --foreground-scripts bun`");
  process.exit(1);
}
