// The run form, derived from the flow's input nodes (docs/flow-format.md, "Flow-level inputs
// and outputs"; blocks/input.py): each input node is one run input keyed by its config `name`.
// And chat mode: how a conversation maps onto a flow's inputs and outputs, the way the
// OpenAI-compatible endpoint does it (api/routes/openai_compat.py).

import type { FlowDocument, FlowNode } from "./types";
import { LLM_BLOCKS } from "./runState";

export type InputKind = "text" | "number" | "boolean" | "json" | "list";

const KIND_OF_BLOCK: Record<string, InputKind> = {
  text_input: "text",
  number_input: "number",
  boolean_input: "boolean",
  json_input: "json",
  list_input: "list",
};

export interface InputField {
  name: string; // the key in a run's inputs
  nodeId: string;
  block: string;
  kind: InputKind;
  label: string;
  description: string;
  required: boolean; // true: the run needs a value (required and no default)
  default: unknown; // undefined: none
}

/** Form values are kept as the text the user typed (booleans as "true"/"false"/""). */
export type FormValues = Record<string, string>;

export function isInputNode(node: FlowNode): boolean {
  return node.block in KIND_OF_BLOCK;
}

export function inputFields(flow: FlowDocument): InputField[] {
  const fields: InputField[] = [];
  const seen = new Set<string>();
  for (const node of flow.nodes ?? []) {
    const kind = KIND_OF_BLOCK[node.block];
    if (!kind) continue;
    const config = (node.config ?? {}) as Record<string, unknown>;
    const name = typeof config.name === "string" && config.name ? config.name : node.id;
    if (seen.has(name)) continue; // a duplicate name is a validation error the run reports
    seen.add(name);
    const dflt = config.default;
    const hasDefault = dflt !== undefined && dflt !== null;
    fields.push({
      name,
      nodeId: node.id,
      block: node.block,
      kind,
      label: node.label || name,
      description: typeof config.description === "string" ? config.description : "",
      required: config.required !== false && !hasDefault,
      default: hasDefault ? dflt : undefined,
    });
  }
  return fields;
}

/** The text a field starts with: its default, as the user would type it. */
export function initialValue(field: InputField): string {
  const value = field.default;
  if (value === undefined) return field.kind === "boolean" && field.required ? "false" : "";
  return formatValue(field, value);
}

function formatValue(field: InputField, value: unknown): string {
  if (field.kind === "json") return JSON.stringify(value, null, 2) ?? "";
  if (field.kind === "list") return Array.isArray(value) ? JSON.stringify(value) : String(value);
  if (typeof value === "string") return value;
  if (typeof value === "object" && value !== null) return JSON.stringify(value);
  return String(value);
}

/** Values for these fields: the ones typed so far, defaults for the new fields. */
export function syncValues(fields: InputField[], values: FormValues): FormValues {
  const next: FormValues = {};
  let changed = Object.keys(values).length !== fields.length;
  for (const field of fields) {
    if (field.name in values) next[field.name] = values[field.name];
    else {
      next[field.name] = initialValue(field);
      changed = true;
    }
  }
  return changed ? next : values;
}

/** A stored run's inputs back in the form ("use these inputs"). */
export function valuesFromInputs(
  fields: InputField[],
  inputs: Record<string, unknown>,
): FormValues {
  const values: FormValues = {};
  for (const field of fields) {
    values[field.name] =
      field.name in inputs ? formatValue(field, inputs[field.name]) : initialValue(field);
  }
  return values;
}

export interface ParsedInputs {
  inputs: Record<string, unknown>;
  errors: Record<string, string>; // field name -> what is wrong
}

/** The run's `inputs` from the form. An empty field is left out (its default applies) unless
 *  the input is required: then it is an error, as a run that hands a model "" for a required
 *  question only wastes a call; values are parsed as the input blocks parse text. */
export function parseInputs(fields: InputField[], values: FormValues): ParsedInputs {
  const inputs: Record<string, unknown> = {};
  const errors: Record<string, string> = {};
  for (const field of fields) {
    const raw = values[field.name] ?? "";
    const text = raw.trim();
    if (text === "") {
      if (!field.required) continue;
      if (field.kind === "list") inputs[field.name] = [];
      else errors[field.name] = "required";
      continue;
    }
    switch (field.kind) {
      case "text":
        inputs[field.name] = raw;
        break;
      case "number": {
        const n = Number(text);
        if (Number.isFinite(n)) inputs[field.name] = n;
        else errors[field.name] = `not a number: ${text}`;
        break;
      }
      case "boolean": {
        const v = text.toLowerCase();
        if (["true", "yes", "1", "on"].includes(v)) inputs[field.name] = true;
        else if (["false", "no", "0", "off"].includes(v)) inputs[field.name] = false;
        else errors[field.name] = "true or false";
        break;
      }
      case "json":
        try {
          inputs[field.name] = JSON.parse(text);
        } catch (e) {
          errors[field.name] = `not valid JSON: ${(e as Error).message}`;
        }
        break;
      case "list":
        if (text.startsWith("[")) {
          try {
            const value: unknown = JSON.parse(text);
            if (Array.isArray(value)) inputs[field.name] = value;
            else errors[field.name] = "not a list";
          } catch (e) {
            errors[field.name] = `not a valid JSON list: ${(e as Error).message}`;
          }
        } else {
          inputs[field.name] = text.split(",").map((part) => part.trim());
        }
        break;
    }
  }
  return { inputs, errors };
}

// -- chat mode -----------------------------------------------------------------------------

const CONVERSATION_NAMES = ["messages", "history", "conversation"];
const ANSWER_NAMES = ["answer", "output", "reply", "response"];

export interface ChatSetup {
  /** "conversation": an input takes the whole conversation ({role, content} list);
   *  "text": a text input takes the last user message (the flow keeps no memory). */
  kind: "conversation" | "text";
  input: string; // the input that takes the conversation / the message
  messageInput: string | null; // conversation kind: another text input given the last message
  answer: string; // the output that is the reply
  streamNode: string | null; // the LLM node whose tokens stream into the reply
  otherFields: InputField[]; // the remaining inputs, still asked in the form
}

export interface ChatMessage {
  role: "user" | "assistant";
  content: string;
  runId?: string;
  error?: string;
  scripted?: boolean;
  pending?: boolean;
}

function outputNames(flow: FlowDocument): Map<string, string> {
  const names = new Map<string, string>(); // output name -> node id
  for (const node of flow.nodes ?? []) {
    if (node.block !== "output") continue;
    const config = (node.config ?? {}) as Record<string, unknown>;
    names.set(typeof config.name === "string" && config.name ? config.name : node.id, node.id);
  }
  return names;
}

/** The nearest LLM node upstream of `nodeId` (breadth first), or null. */
export function upstreamLlm(flow: FlowDocument, nodeId: string): string | null {
  const blocks = new Map((flow.nodes ?? []).map((n) => [n.id, n.block]));
  const seen = new Set([nodeId]);
  let frontier = [nodeId];
  while (frontier.length) {
    const next: string[] = [];
    for (const id of frontier) {
      for (const edge of flow.edges ?? []) {
        if (edge.target.node !== id || seen.has(edge.source.node)) continue;
        seen.add(edge.source.node);
        if (LLM_BLOCKS.has(blocks.get(edge.source.node) ?? "") && blocks.get(edge.source.node) !== "embedding")
          return edge.source.node;
        next.push(edge.source.node);
      }
    }
    frontier = next;
  }
  return null;
}

/** How the flow takes a conversation, or null when it is not conversational. */
export function chatSetup(flow: FlowDocument, fields = inputFields(flow)): ChatSetup | null {
  const outputs = outputNames(flow);
  const answer =
    ANSWER_NAMES.find((name) => outputs.has(name)) ??
    (outputs.size === 1 ? [...outputs.keys()][0] : undefined);
  if (answer === undefined) return null;
  const answerNode = outputs.get(answer)!;
  const streamNode = upstreamLlm(flow, answerNode);

  const conversation = fields.find(
    (f) => CONVERSATION_NAMES.includes(f.name) && (f.kind === "list" || f.kind === "json"),
  );
  if (conversation) {
    const others = fields.filter((f) => f !== conversation);
    const requiredText = others.filter((f) => f.required);
    const messageInput =
      requiredText.length === 1 && requiredText[0].kind === "text" ? requiredText[0].name : null;
    return {
      kind: "conversation",
      input: conversation.name,
      messageInput,
      answer,
      streamNode,
      otherFields: others.filter((f) => f.name !== messageInput),
    };
  }
  // A text input alone is no chat: the reply must be a chat model's answer, wired straight in.
  const feeds = (flow.edges ?? []).filter((e) => e.target.node === answerNode).map((e) => e.source.node);
  if (streamNode === null || !feeds.includes(streamNode)) return null;
  const required = fields.filter((f) => f.required);
  const text =
    required.length === 1
      ? required[0]
      : required.length === 0 && fields.filter((f) => f.kind === "text").length === 1
        ? fields.find((f) => f.kind === "text")!
        : undefined;
  if (!text || text.kind !== "text") return null;
  return {
    kind: "text",
    input: text.name,
    messageInput: null,
    answer,
    streamNode,
    otherFields: fields.filter((f) => f !== text),
  };
}

/** The run's inputs for one more user message of the conversation. */
export function chatInputs(
  setup: ChatSetup,
  transcript: ChatMessage[],
  message: string,
  formInputs: Record<string, unknown>,
): Record<string, unknown> {
  const inputs: Record<string, unknown> = {};
  for (const field of setup.otherFields) {
    if (field.name in formInputs) inputs[field.name] = formInputs[field.name];
  }
  if (setup.kind === "text") {
    inputs[setup.input] = message;
    return inputs;
  }
  const conversation = transcript
    .filter((m) => !m.error && !m.pending && m.content !== "")
    .map((m) => ({ role: m.role, content: m.content }));
  conversation.push({ role: "user", content: message });
  inputs[setup.input] = conversation;
  if (setup.messageInput) inputs[setup.messageInput] = message;
  return inputs;
}

/** An output value as chat text. */
export function answerText(value: unknown): string {
  if (typeof value === "string") return value;
  if (value === undefined) return "";
  return JSON.stringify(value, null, 2);
}
