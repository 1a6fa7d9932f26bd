import { describe, expect, it } from "vitest";
import { blockIcon, blockKind, blockTitle } from "./blockTitle";

describe("block titles", () => {
  it("reads names as words, acronyms upper-case", () => {
    expect(blockTitle("text_input")).toBe("Text input");
    expect(blockTitle("to_json")).toBe("To JSON");
    expect(blockTitle("http_request")).toBe("HTTP request");
  });

  it("calls the output block an output, whatever its category", () => {
    expect(blockKind({ category: "input", role: "flow_output" })).toBe("output");
    expect(blockKind({ category: "input", role: "flow_input" })).toBe("input");
    expect(blockIcon({ category: "llm", role: "transform" })).toBe("✦");
  });
});
