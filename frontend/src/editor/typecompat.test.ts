import { describe, expect, it } from "vitest";
import { checkTypes, compatExpr, parseType, typeColour } from "./typecompat";

const compat = (s: string, t: string) => compatExpr(parseType(s), parseType(t));

describe("type compatibility (the server's rules, on type names)", () => {
  it.each([
    ["str", "str", "yes"],
    ["int", "float", "yes"],
    ["float", "int", "no"],
    ["str", "Any", "yes"],
    ["Any", "str", "check"],
    ["str | None", "str", "check"],
    ["str", "str | None", "yes"],
    ["None", "str | None", "yes"],
    ["str", "list[str]", "no"],
    ["list[str]", "list[Any]", "yes"],
    ["list[Any]", "list[str]", "check"],
    ["list[str]", "str", "no"],
    ["list[int]", "list[float]", "yes"],
    ["dict[str, Any]", "dict[str, str]", "check"],
    ["dict[str, str]", "dict[str, Any]", "yes"],
    ["list[dict[str, Any]]", "list[dict[str, Any]] | None", "yes"],
    ["bool", "str", "no"],
    ["Literal['a', 'b']", "str", "yes"],
    ["str", "Literal['a', 'b']", "check"],
    ["int", "Literal['a']", "no"],
    ["Literal['a']", "Literal['a', 'b']", "yes"],
    ["Literal['a', 'c']", "Literal['a', 'b']", "check"],
    ["str | int", "float", "check"],
    ["str | bool", "float", "no"],
  ])("%s -> %s: %s", (s, t, expected) => {
    expect(compat(s, t)).toBe(expected);
  });

  it("cannot judge models by name (the server does)", () => {
    expect(compat("Answer", "Question")).toBe("unknown");
    expect(compat("Answer", "Answer")).toBe("yes");
  });

  it("prefers the server's matrix, falls back to the rules, allows what neither knows", () => {
    const matrix = { str: { "list[str]": "check" as const } };
    expect(checkTypes("str", "list[str]", matrix)).toEqual({ ok: true, compat: "check" });
    expect(checkTypes("str", "list[str]", null)).toEqual({ ok: false, compat: "no", reason: "str → list[str]: incompatible" });
    expect(checkTypes("int", "list[str]", matrix).ok).toBe(false);
    expect(checkTypes("Answer", "Question", matrix).ok).toBe(true);
  });

  it("colours a port by its type's family", () => {
    expect(typeColour("int")).toBe(typeColour("float"));
    expect(typeColour("list[str]")).toBe(typeColour("list[Any]"));
    expect(typeColour("str")).not.toBe(typeColour("list[str]"));
    expect(typeColour("str | None")).toBe(typeColour("str"));
    expect(typeColour("MyModel")).toMatch(/^hsl/);
  });
});

describe("agreement with the server", () => {
  it("the local rules give the server's verdict for every pair of its matrix", async () => {
    const { default: text } = await import("../test/types.fixture.json?raw");
    const server = JSON.parse(text) as { types: string[]; compatibility: Record<string, Record<string, string>> };
    const disagreements: string[] = [];
    for (const s of server.types)
      for (const t of server.types) {
        const local = compat(s, t);
        if (local !== server.compatibility[s][t]) disagreements.push(`${s} -> ${t}: server ${server.compatibility[s][t]}, local ${local}`);
      }
    expect(disagreements).toEqual([]);
    expect(server.types.length).toBeGreaterThan(10);
  });
});
