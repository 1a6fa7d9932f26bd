// A template node's ports asked of a scripted server whose answers the test releases in any
// order: an answer (or a refusal) counts only for the config it was asked about, and a
// refusal goes with its node when the node is deleted or renamed.
import { act, cleanup, renderHook } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { FlowDocument } from "../../api/types";
import { blocks } from "../../test/fixtures";
import { type Graph, flowToGraph } from "../graph";
import type { FlowMeta } from "./useFlowDocument";
import { usePortRefresh } from "./usePortRefresh";

type Call = { config: unknown; ok: (inputs: string[]) => void; refuse: (message: string) => void };

function scriptedPorts() {
  const calls: Call[] = [];
  vi.stubGlobal("fetch", (url: string, init: RequestInit) => {
    // The flow-opening call for every node at once is left unanswered: the node's own calls
    // are what this tests.
    if (url === "/api/v1/blocks/ports") return new Promise<Response>(() => {});
    expect(url).toBe("/api/v1/blocks/template/ports");
    const json = (status: number, body: unknown) => new Response(JSON.stringify(body), { status });
    return new Promise<Response>((resolve) =>
      calls.push({
        config: JSON.parse(String(init.body)),
        ok: (inputs) => resolve(json(200, { inputs: inputs.map((name) => ({ name, type: "Any" })), outputs: [{ name: "output", type: "str" }], branches: null })),
        refuse: (message) => resolve(json(422, { error: { code: "invalid_config", message } })),
      }),
    );
  });
  return calls;
}

const doc = (template: string, id = "t"): FlowDocument => ({
  format: "dagwright.flow",
  version: 1,
  nodes: [{ id, block: "template", config: { template } }],
  edges: [],
});

function setup() {
  const graphRef = { current: flowToGraph(doc("{{ a }}"), blocks) as Graph };
  const metaRef = { current: { name: "f", description: "" } as FlowMeta };
  const replace = (fn: (g: Graph) => Graph) => {
    graphRef.current = fn(graphRef.current);
  };
  const hook = renderHook(({ nodes }) => usePortRefresh({ graphRef, nodes, metaRef, blocks, replace }), {
    initialProps: { nodes: graphRef.current.nodes },
  });
  const edit = (template: string, id = "t") => {
    graphRef.current = flowToGraph(doc(template, id), blocks);
    hook.rerender({ nodes: graphRef.current.nodes });
  };
  const inputs = () => graphRef.current.nodes[0].data.ports.inputs.map((p) => p.name);
  return { hook, edit, inputs };
}

beforeEach(() => vi.useFakeTimers());
afterEach(() => {
  cleanup();
  vi.useRealTimers();
  vi.unstubAllGlobals();
});

describe("usePortRefresh", () => {
  it("a late refusal for an older config does not cover a newer success", async () => {
    const calls = scriptedPorts();
    const { hook, edit, inputs } = setup();
    act(() => hook.result.current.refreshPorts("t", 0));
    await act(() => vi.advanceTimersByTimeAsync(0));
    edit("{{ b }}");
    act(() => hook.result.current.refreshPorts("t", 0));
    await act(() => vi.advanceTimersByTimeAsync(0));
    expect(calls.map((c) => c.config)).toEqual([{ template: "{{ a }}" }, { template: "{{ b }}" }]);

    await act(async () => calls[1].ok(["b"]));
    await act(async () => calls[0].refuse("older config"));
    expect(inputs()).toEqual(["b"]);
    expect(hook.result.current.portsErrors).toEqual({});
  });

  it("keeps a refusal for the config asked, and forgets it when the node goes", async () => {
    const calls = scriptedPorts();
    const { hook, edit } = setup();
    act(() => hook.result.current.refreshPorts("t", 0));
    await act(() => vi.advanceTimersByTimeAsync(0));
    await act(async () => calls[0].refuse("bad template"));
    expect(hook.result.current.portsErrors).toEqual({ t: "invalid_config: bad template" });

    edit("{{ a }}", "renamed");
    expect(hook.result.current.portsErrors).toEqual({});
  });
});
