// @vitest-environment node
import { describe, expect, it } from "vitest";
import {
  answerText,
  chatInputs,
  chatSetup,
  initialValue,
  inputFields,
  parseInputs,
  syncValues,
  valuesFromInputs,
} from "./inputs";
import type { FlowDocument, FlowNode } from "./types";

function flow(nodes: FlowNode[], edges: [string, string, string?][] = []): FlowDocument {
  return {
    format: "dagwright.flow",
    version: 1,
    nodes,
    edges: edges.map(([source, target, port]) => ({
      source: { node: source, port: "output" },
      target: { node: target, port: port ?? "value" },
    })),
  };
}

const allKinds = flow([
  { id: "q", block: "text_input", config: { name: "question", description: "Ask", default: "Who?" } },
  { id: "limit", block: "number_input", config: { name: "limit" } },
  { id: "verbose", block: "boolean_input", config: { name: "verbose", default: false } },
  { id: "filters", block: "json_input", config: { name: "filters", default: { year: 2023 } } },
  { id: "names", block: "list_input", config: { name: "names", required: false } },
  { id: "greet", block: "template", config: { template: "{{ question }}" } },
  { id: "out", block: "output", config: { name: "answer" } },
]);

describe("the input form", () => {
  it("has one field per input node, keyed by the input's name", () => {
    const fields = inputFields(allKinds);
    expect(fields.map((f) => [f.name, f.nodeId, f.kind, f.required])).toEqual([
      ["question", "q", "text", false],
      ["limit", "limit", "number", true],
      ["verbose", "verbose", "boolean", false],
      ["filters", "filters", "json", false],
      ["names", "names", "list", false],
    ]);
    expect(fields[0].description).toBe("Ask");
    expect(fields[0].default).toBe("Who?");
  });

  it("starts from the defaults, written as one would type them", () => {
    const fields = inputFields(allKinds);
    expect(fields.map(initialValue)).toEqual(["Who?", "", "false", '{\n  "year": 2023\n}', ""]);
  });

  it("parses values as the input blocks do, leaving empty optional fields to their default", () => {
    const fields = inputFields(allKinds);
    const values = {
      question: "",
      limit: " 3.5 ",
      verbose: "yes",
      filters: '{"a": [1, 2]}',
      names: "Tom, Ann ,Bo",
    };
    expect(parseInputs(fields, values)).toEqual({
      inputs: { limit: 3.5, verbose: true, filters: { a: [1, 2] }, names: ["Tom", "Ann", "Bo"] },
      errors: {},
    });
    expect(parseInputs(fields, { ...values, names: '["x", 2]' }).inputs.names).toEqual(["x", 2]);
  });

  it("says what is wrong with a value", () => {
    const fields = inputFields(allKinds);
    const { errors } = parseInputs(fields, {
      limit: "",
      verbose: "maybe",
      filters: "{oops",
      names: "[1,",
    });
    expect(errors.limit).toBe("required");
    expect(errors.verbose).toBe("true or false");
    expect(errors.filters).toMatch(/^not valid JSON/);
    expect(errors.names).toMatch(/^not a valid JSON list/);
    expect(parseInputs(fields, { limit: "ten" }).errors.limit).toBe("not a number: ten");
  });

  it("refuses a required text input left empty or blank, and names an input without a name by its id", () => {
    const f = flow([{ id: "t", block: "text_input", config: {} }]);
    const fields = inputFields(f);
    expect(fields[0].name).toBe("t");
    for (const blank of ["", "   "]) {
      const parsed = parseInputs(fields, { t: blank });
      expect(parsed.inputs).toEqual({});
      expect(parsed.errors.t).toBe("required");
    }
    expect(parseInputs(fields, { t: " hi " }).inputs).toEqual({ t: " hi " });
  });

  it("keeps what was typed when the flow changes, with defaults for new inputs", () => {
    const before = inputFields(allKinds);
    const typed = { ...syncValues(before, {}), limit: "9" };
    const after = inputFields(
      flow([...(allKinds.nodes ?? []), { id: "extra", block: "text_input", config: { name: "extra", default: "x" } }]),
    );
    const synced = syncValues(after, typed);
    expect(synced.limit).toBe("9");
    expect(synced.extra).toBe("x");
    expect(syncValues(after, synced)).toBe(synced); // stable when nothing changed
    expect(valuesFromInputs(before, { limit: 4, names: ["a"] })).toMatchObject({ limit: "4", names: '["a"]', question: "Who?" });
  });
});

describe("chat mode", () => {
  it("a text input and a chat model's answer: each message is the input", () => {
    const f = flow(
      [
        { id: "question", block: "text_input", config: { name: "question", default: "hi" } },
        { id: "answer", block: "chat", config: { prompt: "{{ question }}" } },
        { id: "out", block: "output", config: { name: "answer" } },
      ],
      [
        ["question", "answer", "question"],
        ["answer", "out"],
      ],
    );
    const setup = chatSetup(f)!;
    expect(setup).toMatchObject({ kind: "text", input: "question", answer: "answer", streamNode: "answer" });
    expect(chatInputs(setup, [], "Hello?", {})).toEqual({ question: "Hello?" });
  });

  it("an input named messages takes the conversation so far", () => {
    const f = flow(
      [
        { id: "messages", block: "list_input", config: { name: "messages" } },
        { id: "tone", block: "text_input", config: { name: "tone", default: "dry" } },
        { id: "llm", block: "chat", config: { prompt: "go" } },
        { id: "fmt", block: "template", config: { template: "{{ value }}" } },
        { id: "reply", block: "output", config: { name: "reply" } },
      ],
      [
        ["messages", "llm", "history"],
        ["llm", "fmt"],
        ["fmt", "reply"],
      ],
    );
    const setup = chatSetup(f)!;
    expect(setup).toMatchObject({ kind: "conversation", input: "messages", answer: "reply", streamNode: "llm" });
    expect(setup.otherFields.map((x) => x.name)).toEqual(["tone"]);
    const transcript = [
      { role: "user" as const, content: "Hi" },
      { role: "assistant" as const, content: "Hello" },
      { role: "user" as const, content: "fail me" },
      { role: "assistant" as const, content: "", error: "boom" },
    ];
    expect(chatInputs(setup, transcript, "And now?", { tone: "warm" })).toEqual({
      tone: "warm",
      messages: [
        { role: "user", content: "Hi" },
        { role: "assistant", content: "Hello" },
        { role: "user", content: "fail me" },
        { role: "user", content: "And now?" },
      ],
    });
  });

  it("is not offered for flows that are not conversational", () => {
    const template = flow(
      [
        { id: "name", block: "text_input", config: { name: "name" } },
        { id: "greet", block: "template", config: { template: "Hello {{ name }}" } },
        { id: "out", block: "output", config: { name: "greeting" } },
      ],
      [
        ["name", "greet", "name"],
        ["greet", "out"],
      ],
    );
    expect(chatSetup(template)).toBeNull(); // no model answers
    const postProcessed = flow(
      [
        { id: "q", block: "text_input", config: { name: "q" } },
        { id: "llm", block: "chat", config: { prompt: "{{ q }}" } },
        { id: "fmt", block: "template", config: { template: "{{ value }}" } },
        { id: "out", block: "output", config: { name: "answer" } },
      ],
      [
        ["q", "llm", "q"],
        ["llm", "fmt"],
        ["fmt", "out"],
      ],
    );
    expect(chatSetup(postProcessed)).toBeNull(); // the reply is not the model's answer
    expect(chatSetup(allKinds)).toBeNull();
    const twoOutputs = flow([
      { id: "messages", block: "list_input", config: { name: "messages" } },
      { id: "a", block: "output", config: { name: "a" } },
      { id: "b", block: "output", config: { name: "b" } },
    ]);
    expect(chatSetup(twoOutputs)).toBeNull(); // which one is the reply?
  });

  it("shows non-text answers as JSON", () => {
    expect(answerText("hi")).toBe("hi");
    expect(answerText({ a: 1 })).toBe('{\n  "a": 1\n}');
    expect(answerText(undefined)).toBe("");
  });
});
