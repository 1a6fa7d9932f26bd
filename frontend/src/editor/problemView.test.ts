import { describe, expect, it } from "vitest";
import type { Problem } from "../api/types";
import { plainMessage, shownProblems, tidyProblems } from "./problemView";

const problem = (over: Partial<Problem>): Problem => ({ node: null, port: null, code: "config_invalid", message: "m", severity: "error", ...over });

describe("problem view", () => {
  it("drops pydantic's prefix and shows one template error once", () => {
    expect(plainMessage("Value error, unexpected '}'")).toBe("unexpected '}'");
    expect(plainMessage("config field 'template': Value error, bad")).toBe("config field 'template': bad");
    const same = problem({ node: "t", message: "Value error, unexpected '}'" });
    const tidy = tidyProblems([same, same, { ...same }, same, problem({ node: "u" })]);
    expect(tidy.map((p) => [p.node, p.message])).toEqual([
      ["t", "unexpected '}'"],
      ["u", "m"],
    ]);
  });

  it("shows only touched nodes' problems until everything is asked for", () => {
    const list = [problem({ node: "a" }), problem({ node: "b" }), problem({ code: "no_output" })];
    expect(shownProblems(list, new Set(["a"]), false).map((p) => p.node)).toEqual(["a"]);
    expect(shownProblems(list, new Set(), true)).toHaveLength(3);
  });
});
