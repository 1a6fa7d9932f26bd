import { describe, expect, it } from "vitest";
import { argumentsOf, serverOf } from "./mcpTools";

describe("the mcp_tool form's server and tool schema", () => {
  it("takes the url first, else the command, with the token's secret", () => {
    expect(serverOf({ url: "http://t/mcp", command: ["x"], token_secret: "k" })).toEqual({
      url: "http://t/mcp",
      token_secret: "k",
    });
    expect(serverOf({ url: "", command: ["python", "s.py"] })).toEqual({ command: ["python", "s.py"] });
    expect(serverOf({ tool: "add" })).toBeNull();
  });

  it("lists each argument with its type, whether required, and its default", () => {
    const rows = argumentsOf({
      name: "shout",
      input_schema: {
        type: "object",
        properties: { text: { type: "string", description: "what" }, marks: { type: "integer", default: 1 } },
        required: ["text"],
      },
    });
    expect(rows).toEqual([
      { name: "text", type: "string", required: true, description: "what" },
      { name: "marks", type: "integer", required: false, description: "", default: 1 },
    ]);
  });
});
