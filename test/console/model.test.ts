/** The console's pure functions: what its views derive from the API's answers. */
import { describe, expect, it } from "vitest";
import { openDeadLetters } from "../../console/src/model.ts";
import type { DeliveryAttempt } from "../../subjects/notifications.ts";

const attempt = (event_id: string, attempt: number, state: DeliveryAttempt["state"]): DeliveryAttempt => ({ event_id, attempt, state });

describe("console model", () => {
  it("dead letters - an event whose last scheduled attempt is dead stays open until a replay succeeds", () => {
    expect(openDeadLetters([attempt("a", 2, "dead"), attempt("a", 1, "failed"), attempt("b", 1, "succeeded")])).toEqual([
      attempt("a", 2, "dead"),
    ]);
    // Newest first: a failed replay keeps the letter, a succeeded one closes it.
    expect(openDeadLetters([attempt("a", 3, "failed"), attempt("a", 2, "dead")])).toEqual([attempt("a", 2, "dead")]);
    expect(openDeadLetters([attempt("a", 3, "succeeded"), attempt("a", 2, "dead")])).toEqual([]);
  });

  it("dead letters - each event is listed once, by its newest dead attempt", () => {
    expect(openDeadLetters([attempt("a", 4, "dead"), attempt("a", 2, "dead"), attempt("c", 1, "pending")])).toEqual([
      attempt("a", 4, "dead"),
    ]);
  });
});
