// Graph editing logic: connection checks, undo/redo, copy/paste, deletion, drafts.

import { describe, expect, it } from "vitest";
import type { FlowDocument } from "../api/types";
import { MemoryStorage, blocks, typesResponse } from "../test/fixtures";
import { copySelection, deleteSelection, pasteClip } from "./clipboard";
import { checkConnection } from "./connect";
import { clearDraft, draftSlugs, flowFingerprint, loadDraft, saveDraft } from "./draft";
import { type Graph, flowToGraph, graphToFlow } from "./graph";
import { History } from "./history";

const doc: FlowDocument = {
  format: "dagwright.flow",
  version: 1,
  nodes: [
    { id: "q", block: "text_input", config: { name: "question" }, position: { x: 0, y: 0 } },
    { id: "split", block: "text_split", config: {}, position: { x: 200, y: 0 } },
    { id: "join", block: "text_join", config: {}, position: { x: 400, y: 0 } },
    { id: "tpl", block: "template", config: { template: "{{ a }} {{ b }}" }, position: { x: 200, y: 200 } },
    { id: "route", block: "switch", config: { cases: ["x"] }, position: { x: 400, y: 200 } },
    { id: "out", block: "output", config: { name: "answer" }, position: { x: 600, y: 0 } },
  ],
  edges: [
    { source: { node: "q", port: "output" }, target: { node: "split", port: "text" } },
    { source: { node: "split", port: "output" }, target: { node: "join", port: "texts" } },
    { source: { node: "join", port: "output" }, target: { node: "out", port: "value" } },
  ],
};

// The template node's ports as the server answers them (the editor reads no template).
const variable = (name: string) => ({ name, type: "Any", schema: {}, required: true, description: "" });
const graph = (): Graph => {
  const g = flowToGraph(doc, blocks);
  const tpl = g.nodes.find((n) => n.id === "tpl")!;
  tpl.data = { ...tpl.data, ports: { ...tpl.data.ports, inputs: [variable("a"), variable("b")], pending: undefined } };
  return g;
};

describe("connection checks while dragging", () => {
  it("refuses incompatible types, naming both", () => {
    const verdict = checkConnection(graph(), { source: "q", sourceHandle: "output", target: "join", targetHandle: "texts" }, typesResponse.compatibility);
    expect(verdict).toEqual({ ok: false, reason: "str → list[str]: incompatible", compat: "no" });
  });

  it("allows fitting types, and Any into a narrower port with a run-time check", () => {
    expect(checkConnection(graph(), { source: "q", sourceHandle: "output", target: "tpl", targetHandle: "a" }, typesResponse.compatibility)).toEqual({ ok: true, compat: "yes" });
    expect(checkConnection(graph(), { source: "route", sourceHandle: "output#x", target: "split", targetHandle: "text" }, typesResponse.compatibility)).toEqual({ ok: true, compat: "check" });
  });

  it("follows the server's matrix when it has the pair", () => {
    const matrix = { str: { "list[str]": "check" as const } };
    expect(checkConnection(graph(), { source: "q", sourceHandle: "output", target: "join", targetHandle: "texts" }, matrix).ok).toBe(true);
  });

  it("refuses self-loops, cycles, duplicates and unknown ports", () => {
    const g = graph();
    expect(checkConnection(g, { source: "split", sourceHandle: "output", target: "split", targetHandle: "text" }, typesResponse.compatibility).reason).toMatch(/itself/);
    expect(checkConnection(g, { source: "join", sourceHandle: "output", target: "split", targetHandle: "text" }, typesResponse.compatibility).reason).toMatch(/cycle/);
    expect(checkConnection(g, { source: "q", sourceHandle: "output", target: "split", targetHandle: "text" }, typesResponse.compatibility).reason).toBe("already connected");
    expect(checkConnection(g, { source: "q", sourceHandle: "output", target: "tpl", targetHandle: "nope" }, typesResponse.compatibility).ok).toBe(false);
  });
});

describe("undo / redo", () => {
  it("steps back and forth through snapshots", () => {
    const h = new History<number>();
    let state = 0;
    const edit = (next: number) => {
      h.push(state);
      state = next;
    };
    edit(1);
    edit(2);
    edit(3);
    state = h.undo(state)!;
    expect(state).toBe(2);
    state = h.undo(state)!;
    expect(state).toBe(1);
    state = h.redo(state)!;
    expect(state).toBe(2);
    edit(9); // a new edit drops the redo branch
    expect(h.canRedo).toBe(false);
    expect(h.redo(state)).toBeNull();
    state = h.undo(state)!;
    state = h.undo(state)!;
    state = h.undo(state)!;
    expect(state).toBe(0);
    expect(h.undo(state)).toBeNull();
  });

  it("coalesces typing into one field into one step, within the time window", () => {
    let now = 0;
    const h = new History<string>(100, 1000, () => now);
    let s = "";
    for (const ch of "hello") {
      h.push(s, "config:n:template");
      s += ch;
      now += 100;
    }
    now += 5000;
    h.push(s, "config:n:template");
    s += "!";
    expect(h.undo(s)).toBe("hello");
    expect(h.undo("hello")).toBe("");
  });

  it("keeps at most `limit` steps", () => {
    const h = new History<number>(3);
    for (let i = 0; i < 10; i++) h.push(i);
    let s = 10;
    const seen: number[] = [];
    for (let r = h.undo(s); r !== null; r = h.undo(s)) {
      seen.push(r);
      s = r;
    }
    expect(seen).toEqual([9, 8, 7]);
  });
});

describe("copy / paste / delete", () => {
  const select = (g: Graph, ids: string[]): Graph => ({ ...g, nodes: g.nodes.map((n) => ({ ...n, selected: ids.includes(n.id) })) });

  it("copies the selected nodes with the edges between them only", () => {
    const clip = copySelection(select(graph(), ["q", "split"]))!;
    expect(clip.nodes.map((n) => n.id)).toEqual(["q", "split"]);
    expect(clip.edges).toEqual([{ source: { node: "q", port: "output" }, target: { node: "split", port: "text" } }]);
    expect(copySelection(graph())).toBeNull();
  });

  it("pastes with new ids, remapped edges, fresh input names, offset and selected", () => {
    const g = select(graph(), ["q", "split"]);
    const clip = copySelection(g)!;
    const { graph: pasted, ids } = pasteClip(g, clip, blocks, { x: 40, y: 40 });
    expect(ids).toEqual(["q_2", "split_2"]);
    const q2 = pasted.nodes.find((n) => n.id === "q_2")!;
    expect(q2.data.config.name).toBe("question_2"); // two inputs may not share a name
    expect(q2.position).toEqual({ x: 40, y: 40 });
    expect(pasted.nodes.filter((n) => n.selected).map((n) => n.id)).toEqual(["q_2", "split_2"]);
    const newEdges = graphToFlow(pasted).edges!.slice(3);
    expect(newEdges).toEqual([{ source: { node: "q_2", port: "output" }, target: { node: "split_2", port: "text" } }]);
    // pasting again gives other ids
    expect(pasteClip(pasted, clip, blocks).ids).toEqual(["q_3", "split_3"]);
    // the clipboard is not tied to the graph it came from
    clip.nodes[0].config!.name = "changed";
    expect(q2.data.config.name).toBe("question_2");
  });

  it("deletes the selected nodes with their edges, and selected edges", () => {
    const g = select(graph(), ["split"]);
    const after = deleteSelection(g);
    expect(after.nodes.map((n) => n.id)).not.toContain("split");
    expect(after.edges.map((e) => `${e.source}->${e.target}`)).toEqual(["join->out"]);
    const withEdge = { ...graph(), edges: graph().edges.map((e, i) => ({ ...e, selected: i === 2 })) };
    expect(deleteSelection(withEdge).edges).toHaveLength(2);
    const none = graph();
    expect(deleteSelection(none)).toBe(none);
  });
});

describe("drafts", () => {
  it("keeps a draft per app and restores it", () => {
    const storage = new MemoryStorage();
    expect(loadDraft("a", storage)).toBeNull();
    saveDraft("a", { flow: doc, baseVersionId: "v1", baseNumber: 1 }, storage);
    saveDraft("b", { flow: { ...doc, name: "b" }, baseVersionId: null, baseNumber: null }, storage);
    const draft = loadDraft("a", storage)!;
    expect(draft.flow).toEqual(doc);
    expect(draft.baseNumber).toBe(1);
    expect(draft.savedAt).not.toBe("");
    expect(draftSlugs(storage)).toEqual(new Set(["a", "b"]));
    clearDraft("a", storage);
    expect(loadDraft("a", storage)).toBeNull();
    expect(loadDraft("b", storage)!.flow.name).toBe("b");
  });

  it("ignores a broken draft", () => {
    const storage = new MemoryStorage();
    storage.setItem("dagwright.draft.x", "{not json");
    storage.setItem("dagwright.draft.y", JSON.stringify({ flow: { format: "other" } }));
    expect(loadDraft("x", storage)).toBeNull();
    expect(loadDraft("y", storage)).toBeNull();
  });

  it("compares flows by content, not key order", () => {
    const a = { format: "dagwright.flow", version: 1, nodes: [{ id: "n", block: "b", config: { x: 1, y: 2 } }] } as FlowDocument;
    const b = { version: 1, nodes: [{ config: { y: 2, x: 1 }, block: "b", id: "n" }], format: "dagwright.flow" } as FlowDocument;
    expect(flowFingerprint(a)).toBe(flowFingerprint(b));
    expect(flowFingerprint(graphToFlow(graph()))).toBe(flowFingerprint(graphToFlow(flowToGraph(graphToFlow(graph()), blocks))));
  });
});
