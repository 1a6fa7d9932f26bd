import { describe, expect, it } from "vitest";
import { batches, parseCsv, parseJsonl, parseRecords } from "./records";

describe("example files", () => {
  it("reads JSON Lines and names a bad line", () => {
    expect(parseJsonl('{"q": "a"}\n\n{"q": "b"}\n')).toEqual([{ q: "a" }, { q: "b" }]);
    expect(() => parseJsonl('{"q": 1}\n[1]')).toThrow("line 2 is not a JSON object");
    expect(() => parseJsonl("nope")).toThrow("line 1 is not JSON");
  });

  it("reads CSV with quoted commas, doubled quotes and line breaks", () => {
    expect(parseCsv('q,sql\r\n"a, b","say ""hi""\nthen"\nc,d\n')).toEqual([
      { q: "a, b", sql: 'say "hi"\nthen' },
      { q: "c", sql: "d" },
    ]);
    expect(parseRecords("x.CSV", "a\n1")).toEqual([{ a: "1" }]);
  });

  it("cuts uploads into batches", () => {
    expect(batches([1, 2, 3, 4, 5], 2)).toEqual([[1, 2], [3, 4], [5]]);
  });
});
