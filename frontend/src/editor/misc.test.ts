import { describe, expect, it } from "vitest";
import { parseRoute, routeHash } from "../router";
import { blocks } from "../test/fixtures";
import { fieldErrorsOf } from "./ConfigPanel";
import { flowToGraph } from "./graph";
import { buildSnippets, exampleInputs } from "./snippets";

describe("routes", () => {
  it("parses and builds hash routes", () => {
    expect(parseRoute("")).toEqual({ page: "apps" });
    expect(parseRoute("#/")).toEqual({ page: "apps" });
    expect(parseRoute("#/apps/hello")).toEqual({ page: "editor", slug: "hello", version: null });
    expect(parseRoute("#/apps/hello/v/3")).toEqual({ page: "editor", slug: "hello", version: 3 });
    expect(parseRoute("#/nonsense")).toEqual({ page: "apps" });
    expect(routeHash({ page: "editor", slug: "a-b", version: 2 })).toBe("#/apps/a-b/v/2");
    expect(parseRoute(routeHash({ page: "editor", slug: "x", version: null }))).toEqual({ page: "editor", slug: "x", version: null });
  });
});

describe("publish snippets", () => {
  const graph = flowToGraph(
    {
      format: "dagwright.flow",
      version: 1,
      nodes: [
        { id: "q", block: "text_input", config: { name: "question" } },
        { id: "n", block: "number_input", config: { name: "count", default: 3 } },
        { id: "o", block: "output", config: { name: "answer" } },
      ],
      edges: [],
    },
    blocks,
  );

  it("example inputs come from the input nodes", () => {
    expect(exampleInputs(graph, blocks)).toEqual({ question: "Hello", count: 3 });
  });

  it("every snippet names the endpoint, the key and the inputs", () => {
    const s = buildSnippets("http://host:8000", "qa", { question: "Hi 'there'", count: 3 }, "dw_KEY");
    expect(s.url).toBe("http://host:8000/api/v1/apps/qa/run");
    expect(s.curl).toContain("curl -X POST http://host:8000/api/v1/apps/qa/run");
    expect(s.curl).toContain("Authorization: Bearer dw_KEY");
    expect(s.curl).toContain(`'{"inputs":{"question":"Hi '\\''there'\\''","count":3}}'`);
    expect(s.python).toContain('json={"inputs": {"question": "Hi \'there\'", "count": 3}}');
    expect(s.openai).toContain('base_url="http://host:8000/v1"');
    expect(s.openai).toContain('model="qa"');
    expect(s.javascript).toContain('fetch("http://host:8000/api/v1/apps/qa/run"');
  });
});

describe("config problems by field", () => {
  it("puts invalid_config messages by the field they name", () => {
    const errors = fieldErrorsOf(
      [
        { node: "t", port: null, code: "invalid_config", message: "template: template does not parse", severity: "error" },
        { node: "t", port: "x", code: "missing_required_input", message: "x has no edge", severity: "error" },
        { node: "t", port: null, code: "invalid_config", message: "config field 'other': Value error, '' is not a valid secret name", severity: "error" },
      ],
      ["template", "other"],
    );
    expect(errors).toEqual({ template: "template does not parse", other: "Value error, '' is not a valid secret name" });
  });
});
