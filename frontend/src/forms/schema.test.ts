import { describe, expect, it } from "vitest";
import type { JsonSchema } from "../api/types";
import { spec } from "../test/fixtures";
import { classifyField, formFields, parseJsonText, setField, textToValue, valueToText } from "./schema";

const kinds = (block: string) => Object.fromEntries(formFields(spec(block).config_schema).map((f) => [f.name, `${f.kind}${f.nullable ? "?" : ""}`]));

describe("schema -> control", () => {
  it("classifies every kind the real block schemas use", () => {
    expect(kinds("text_input")).toEqual({ name: "string", description: "string", required: "boolean", default: "string?" });
    expect(kinds("template")).toEqual({ template: "template" });
    expect(kinds("compare")).toEqual({ op: "enum", operand: "any", case_sensitive: "boolean" });
    expect(kinds("switch")).toEqual({ cases: "string_list", case_sensitive: "boolean" });
    expect(kinds("chat")).toMatchObject({
      provider: "string?",
      temperature: "number?",
      max_tokens: "integer?",
      stop: "string_list?",
      system: "template",
      prompt: "template",
      stream: "boolean",
    });
    expect(kinds("http_request")).toMatchObject({
      method: "enum",
      url: "template",
      headers: "json",
      secret_headers: "secret_map",
      query: "json",
      timeout: "number",
      max_bytes: "integer",
      response: "enum",
    });
    expect(kinds("invoke_remote")).toMatchObject({ inputs: "string_list", api_key_secret: "secret", timeout: "number" });
    expect(kinds("list_input")).toMatchObject({ default: "json?" });
  });

  it("keeps titles, required marks, defaults and enum options", () => {
    const [op] = formFields(spec("compare").config_schema);
    expect(op.title).toBe("Op");
    expect(op.default).toBe("==");
    expect(op.options).toContain("contains");
    const name = formFields(spec("text_input").config_schema)[0];
    expect(name.required).toBe(true);
  });

  it("reads nullable anyOf with its inner constraints", () => {
    const info = classifyField("temperature", { anyOf: [{ type: "number", minimum: 0, maximum: 2 }, { type: "null" }], default: null, title: "Temperature" }, false);
    expect(info.kind).toBe("number");
    expect(info.nullable).toBe(true);
    expect(info.schema.maximum).toBe(2);
    expect(classifyField("x", { type: ["integer", "null"] }, false)).toMatchObject({ kind: "integer", nullable: true });
    expect(classifyField("x", { anyOf: [{ type: "string" }, { type: "integer" }] }, false).kind).toBe("any");
    expect(classifyField("x", { $ref: "#/$defs/M" }, false, { $defs: { M: { type: "object", properties: {} } } }).kind).toBe("json");
    expect(classifyField("mode", { const: "fast" }, false)).toMatchObject({ kind: "enum", options: ["fast"] });
  });
});

describe("text <-> config value", () => {
  const field = (name: string, schema: JsonSchema, required = false) => classifyField(name, schema, required);

  it("numbers and integers; empty means the default", () => {
    const n = field("t", { type: "number", default: 30 });
    expect(textToValue(n, "2.5")).toBe(2.5);
    expect(textToValue(n, "")).toBeUndefined();
    expect(textToValue(n, "abc")).toBe("abc"); // the server refuses it with its own message
    const nullable = field("max_tokens", { anyOf: [{ type: "integer" }, { type: "null" }], default: null });
    expect(textToValue(nullable, "")).toBeUndefined();
    expect(valueToText(nullable, null)).toBe("");
  });

  it("lists of strings, one per line", () => {
    const f = field("cases", { type: "array", items: { type: "string" } }, true);
    expect(textToValue(f, "a\n b \n\nc\n")).toEqual(["a", "b", "c"]);
    expect(valueToText(f, ["a", "b"])).toBe("a\nb");
    const nullable = field("stop", { anyOf: [{ type: "array", items: { type: "string" } }, { type: "null" }], default: null });
    expect(textToValue(nullable, "")).toBeUndefined();
  });

  it("Any: JSON when it parses, else the text", () => {
    const f = field("operand", { default: null });
    expect(textToValue(f, "10")).toBe(10);
    expect(textToValue(f, "[1, 2]")).toEqual([1, 2]);
    expect(textToValue(f, "hello")).toBe("hello");
    expect(valueToText(f, "hello")).toBe("hello");
    expect(valueToText(f, "10")).toBe('"10"'); // the text "10", not the number
    expect(textToValue(f, valueToText(f, "10"))).toBe("10");
  });

  it("nullable strings: empty unsets", () => {
    const f = field("default", { anyOf: [{ type: "string" }, { type: "null" }], default: null });
    expect(textToValue(f, "")).toBeUndefined();
    expect(textToValue(f, "x")).toBe("x");
    expect(textToValue(field("s", { type: "string", default: "" }), "")).toBe("");
  });

  it("JSON editor text: value or the parse error", () => {
    expect(parseJsonText('{"a": 1}')).toEqual({ ok: true, value: { a: 1 } });
    expect(parseJsonText("")).toEqual({ ok: true, value: undefined });
    const bad = parseJsonText("{a: 1}");
    expect(bad.ok).toBe(false);
  });

  it("sets and removes config fields without touching the original", () => {
    const config = { a: 1, b: 2 };
    expect(setField(config, "a", 5)).toEqual({ a: 5, b: 2 });
    expect(setField(config, "b", undefined)).toEqual({ a: 1 });
    expect(config).toEqual({ a: 1, b: 2 });
  });
});
