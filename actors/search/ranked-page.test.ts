import { describe, expect, it } from "vitest";
import { bestFirst, wordRows } from "./ranked-page.ts";
import { seededRandom } from "./testing.ts";

describe("wordRows", () => {
  it("ranked page - no instances is no rows", () => {
    expect(wordRows(null).count).toBe(0);
    expect(wordRows("").count).toBe(0);
  });

  it("ranked page - repeats of a row are one row holding the word that many times", () => {
    const rows = wordRows("3,3,17,250000,250000,250000,1000001");
    expect(Array.from(rows.rids.subarray(0, rows.count))).toEqual([3, 17, 250000, 1000001]);
    expect(Array.from(rows.frequencies.subarray(0, rows.count))).toEqual([2, 1, 3, 1]);
  });

  it("ranked page - one instance, row 0 included", () => {
    const rows = wordRows("0");
    expect(rows.count).toBe(1);
    expect(rows.rids[0]).toBe(0);
    expect(rows.frequencies[0]).toBe(1);
  });
});

describe("bestFirst", () => {
  /** What the query did before: every row sorted by score, then row id. */
  const sortedAll = (scores: number[], rids: number[]) =>
    scores.map((_, i) => i).sort((x, y) => scores[x]! - scores[y]! || rids[x]! - rids[y]!);

  it("ranked page - the k best in ORDER BY rank, rowid order, ties included, for any k", () => {
    const random = seededRandom(11);
    for (let round = 0; round < 200; round++) {
      const count = Math.floor(random() * 300);
      // Few distinct scores: many ties, which the row id must break.
      const scores = Array.from({ length: count }, () => -Math.floor(random() * 8) / 4);
      const rids = Array.from({ length: count }, (_, i) => i * 3 + Math.floor(random() * 3));
      for (let i = count - 1; i > 0; i--) {
        const j = Math.floor(random() * (i + 1));
        [rids[i], rids[j]] = [rids[j]!, rids[i]!];
        [scores[i], scores[j]] = [scores[j]!, scores[i]!];
      }
      const k = Math.floor(random() * (count + 20));
      const best = bestFirst(Float64Array.from(scores), Int32Array.from(rids), count, k);
      expect(best).toEqual(sortedAll(scores, rids).slice(0, k));
    }
  });

  it("ranked page - only the first `count` positions take part", () => {
    const scores = Float64Array.from([-1, -3, -2, -9]);
    const rids = Int32Array.from([10, 11, 12, 13]);
    expect(bestFirst(scores, rids, 3, 10)).toEqual([1, 2, 0]);
    expect(bestFirst(scores, rids, 3, 0)).toEqual([]);
  });
});
