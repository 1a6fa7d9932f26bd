// The one call for many nodes' ports (POST /api/v1/blocks/ports), against a scripted server
// whose answers the test releases: when a flow opens every dynamic node is asked at once;
// a node left pending later (a paste) is asked in a batch of its own; a refused node is
// settled, not asked again at every change of the canvas.
import { act, cleanup, renderHook } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { FlowDocument } from "../../api/types";
import { blocks } from "../../test/fixtures";
import { type Graph, estimatePorts, flowToGraph, withEdgePorts } from "../graph";
import type { FlowMeta } from "./useFlowDocument";
import { usePortRefresh } from "./usePortRefresh";

type Batch = { nodes: Record<string, { block: string; config: Record<string, unknown> }>; answer: (body: unknown) => void };

function scriptedServer() {
  const batches: Batch[] = [];
  const single: string[] = [];
  vi.stubGlobal("fetch", (url: string, init: RequestInit) => {
    if (url !== "/api/v1/blocks/ports") {
      single.push(url);
      return new Promise<Response>(() => {});
    }
    return new Promise<Response>((resolve) =>
      batches.push({
        nodes: (JSON.parse(String(init.body)) as { nodes: Batch["nodes"] }).nodes,
        answer: (body) => resolve(new Response(JSON.stringify(body), { status: 200 })),
      }),
    );
  });
  return { batches, single };
}

const ports = (...inputs: string[]) => ({
  inputs: inputs.map((name) => ({ name, type: "Any", schema: {}, required: true, description: "" })),
  outputs: [{ name: "output", type: "str", schema: {}, required: false, description: "" }],
  branches: [],
});

const doc: FlowDocument = {
  format: "dagwright.flow",
  version: 1,
  nodes: [
    { id: "q", block: "text_input", config: { name: "q" } },
    { id: "greet", block: "template", config: { template: "Hi {{ who }}" } },
    { id: "bad", block: "template", config: { template: "{{ a" } },
  ],
  edges: [
    { source: { node: "q", port: "output" }, target: { node: "greet", port: "who" } },
    { source: { node: "q", port: "output" }, target: { node: "bad", port: "a" } },
  ],
};

function setup() {
  const graphRef = { current: flowToGraph(doc, blocks) as Graph };
  const metaRef = { current: { name: "f", description: "" } as FlowMeta };
  const hook = renderHook(({ nodes }) => usePortRefresh({ graphRef, nodes, metaRef, blocks, replace }), {
    initialProps: { nodes: graphRef.current.nodes },
  });
  function replace(fn: (g: Graph) => Graph) {
    graphRef.current = fn(graphRef.current);
  }
  const rerender = () => hook.rerender({ nodes: graphRef.current.nodes });
  const node = (id: string) => graphRef.current.nodes.find((n) => n.id === id)!;
  return { hook, graphRef, rerender, node };
}

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});

describe("usePortRefresh, many nodes at once", () => {
  it("asks for every dynamic node when the flow opens, in one call, and draws the answer", async () => {
    const server = scriptedServer();
    const { hook, rerender, node } = setup();
    expect(server.batches.map((b) => Object.keys(b.nodes))).toEqual([["greet", "bad"]]);
    expect(node("greet").data.ports.pending).toBe(true);
    expect(node("greet").data.ports.inputs.map((p) => [p.name, !!p.pending])).toEqual([["who", true]]);

    await act(async () =>
      server.batches[0].answer({ ports: { greet: ports("who") }, errors: { bad: { code: "invalid_config", message: "unexpected end" } } }),
    );
    expect(node("greet").data.ports.pending).toBeUndefined();
    expect(node("greet").data.ports.inputs.map((p) => [p.name, !!p.missing])).toEqual([["who", false]]);
    // The refused node is settled: its edge's port is missing, and nobody asks again.
    expect(node("bad").data.ports.pending).toBeUndefined();
    expect(node("bad").data.ports.inputs.map((p) => [p.name, !!p.missing])).toEqual([["a", true]]);
    expect(hook.result.current.portsErrors).toEqual({ bad: "invalid_config: unexpected end" });
    rerender();
    rerender();
    expect(server.batches).toHaveLength(1);
    expect(server.single).toEqual([]);
  });

  it("asks for a node left pending later (a paste) in a call of its own", async () => {
    const server = scriptedServer();
    const { graphRef, rerender, node } = setup();
    await act(async () => server.batches[0].answer({ ports: { greet: ports("who"), bad: ports() }, errors: {} }));
    const pasted = {
      ...node("greet"),
      id: "greet_2",
      data: { ...node("greet").data, config: { template: "Bye {{ who }}" }, ports: withEdgePorts("greet_2", estimatePorts(blocks.get("template"), { template: "Bye {{ who }}" }), []) },
    };
    graphRef.current = { ...graphRef.current, nodes: [...graphRef.current.nodes, pasted] };
    rerender();
    expect(server.batches.map((b) => Object.keys(b.nodes))).toEqual([["greet", "bad"], ["greet_2"]]);
    rerender(); // asked already: not again while the answer is out
    expect(server.batches).toHaveLength(2);
    await act(async () => server.batches[1].answer({ ports: { greet_2: ports("who") }, errors: {} }));
    expect(node("greet_2").data.ports.inputs.map((p) => p.name)).toEqual(["who"]);
    expect(node("greet_2").data.ports.pending).toBeUndefined();
  });
});
