/** Structured JSON logs (pino): one root logger per process, children per actor and request. */
import pino, { type Logger } from "pino";

export type { Logger };

export function createLogger(level: string, name = "derrick"): Logger {
  return pino({ name, level, base: { pid: process.pid }, timestamp: pino.stdTimeFunctions.isoTime });
}
