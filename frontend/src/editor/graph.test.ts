import { describe, expect, it } from "vitest";
import type { FlowDocument } from "../api/types";
import { blocks, spec } from "../test/fixtures";
import {
  edgeFromConnection,
  estimatePorts,
  flowToGraph,
  graphToFlow,
  needsLayout,
  newNode,
  type NodePorts,
  parseSourceHandle,
  pendingPorts,
  sourceHandleId,
  uniqueId,
  withEdgePorts,
} from "./graph";
import { layoutGraph } from "./layout";

const hello: FlowDocument = {
  format: "dagwright.flow",
  version: 1,
  name: "hello",
  description: "Greets a name.",
  nodes: [
    { id: "name", block: "text_input", config: { name: "name", default: "world" }, position: { x: 0, y: 0 } },
    { id: "greet", block: "template", config: { template: "Hello, {{ name }}!" }, position: { x: 260, y: 0 }, label: "Greeting", timeout: 5 },
    { id: "route", block: "compare", config: { op: "is_empty" }, position: { x: 520, y: 0 } },
    { id: "greeting", block: "output", config: { name: "greeting" }, position: { x: 780, y: 0 } },
  ],
  edges: [
    { source: { node: "name", port: "output" }, target: { node: "greet", port: "name" } },
    { source: { node: "greet", port: "output" }, target: { node: "route", port: "value" } },
    { source: { node: "route", port: "output" }, target: { node: "greeting", port: "value" }, branch: "false" },
    { source: { node: "route", port: "output" }, target: { node: "greeting", port: "value" }, branch: "true" },
  ],
};

describe("flow document <-> graph", () => {
  it("round-trips a document (config, label, timeout, positions, branches, fan-in)", () => {
    const graph = flowToGraph(hello, blocks);
    expect(graph.nodes).toHaveLength(4);
    expect(graph.edges).toHaveLength(4);
    expect(graphToFlow(graph, { name: "hello", description: "Greets a name." })).toEqual(hello);
  });

  it("draws branch edges from one handle per branch, labelled", () => {
    const graph = flowToGraph(hello, blocks);
    const branchEdge = graph.edges.find((e) => e.data?.branch === "true")!;
    expect(branchEdge.sourceHandle).toBe("output#true");
    expect(branchEdge.label).toBe("true");
    const route = graph.nodes.find((n) => n.id === "route")!;
    expect(route.data.ports.branches).toEqual(["true", "false"]);
  });

  it("gives each edge a distinct id, even a duplicated one", () => {
    const doc: FlowDocument = { ...hello, edges: [...hello.edges!, hello.edges![0]] };
    const ids = flowToGraph(doc, blocks).edges.map((e) => e.id);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it("defaults a source port to output and fills positions for nodes without", () => {
    const doc: FlowDocument = {
      format: "dagwright.flow",
      version: 1,
      nodes: [
        { id: "a", block: "text_input", config: { name: "a" } },
        { id: "b", block: "output", config: { name: "b" } },
      ],
      edges: [{ source: { node: "a" }, target: { node: "b", port: "value" } }],
    };
    expect(needsLayout(doc)).toBe(true);
    const graph = flowToGraph(doc, blocks);
    expect(graph.edges[0].sourceHandle).toBe("output");
    expect(graphToFlow(graph).edges![0].source).toEqual({ node: "a", port: "output" });
    expect(graph.nodes.every((n) => Number.isFinite(n.position.x))).toBe(true);
  });

  it("keeps a node of an unknown block, with the ports its edges name marked missing", () => {
    const doc: FlowDocument = {
      format: "dagwright.flow",
      version: 1,
      nodes: [
        { id: "a", block: "text_input", config: { name: "a" } },
        { id: "x", block: "no_such_block", config: { k: 1 } },
      ],
      edges: [{ source: { node: "a", port: "output" }, target: { node: "x", port: "in" } }],
    };
    const graph = flowToGraph(doc, blocks);
    const x = graph.nodes.find((n) => n.id === "x")!;
    expect(x.data.ports.inputs).toEqual([expect.objectContaining({ name: "in", missing: true })]);
    expect(graphToFlow(graph).nodes![1]).toEqual({ id: "x", block: "no_such_block", config: { k: 1 }, position: expect.any(Object) });
  });

  it("makes an edge from a connection, with the branch of its handle", () => {
    const edge = edgeFromConnection({ source: "route", sourceHandle: "output#false", target: "greeting", targetHandle: "value" });
    expect(edge.data?.branch).toBe("false");
    expect(parseSourceHandle(sourceHandleId("output", "x#y"))).toEqual({ port: "output", branch: "x#y" });
  });
});

describe("ports", () => {
  it("a filled template leaves its variables to the server: the static ports, pending", () => {
    const ports = estimatePorts(spec("template"), { template: "Answer {{ question }}" });
    expect(ports.inputs).toEqual([]);
    expect(ports.outputs.map((p) => p.name)).toEqual(["output"]);
    expect(ports.branches).toBeNull();
    expect(ports.pending).toBe(true);
    const chat = estimatePorts(spec("chat"), { system: "You answer in {{ lang }}.", prompt: "{{ question }}" });
    expect([chat.inputs.map((p) => p.name), chat.pending]).toEqual([["history"], true]);
    const http = estimatePorts(spec("http_request"), { url: "https://api.example.com/users/{{ user_id }}" });
    expect([http.inputs.map((p) => p.name), http.pending]).toEqual([["body"], true]);
    // nothing to read: nothing to wait for
    expect(estimatePorts(spec("template"), { template: "" }).pending).toBeUndefined();
    expect(estimatePorts(spec("zip_records"), { fields: ["a"] }).pending).toBeUndefined();
  });

  it("while pending, an edit keeps the ports the node had until the server answers", () => {
    const had: NodePorts = {
      inputs: [{ name: "question", type: "Any", schema: {}, required: true, description: "" }],
      outputs: [],
      branches: null,
    };
    const next = pendingPorts(estimatePorts(spec("template"), { template: "{{ question }} {{ more }}" }), had);
    expect([next.inputs.map((p) => p.name), next.pending]).toEqual([["question"], true]);
    const cleared = estimatePorts(spec("template"), { template: "" });
    expect(pendingPorts(cleared, had).inputs).toEqual([]); // no template: no variables
  });

  it("zip_records: a port per field, typed list", () => {
    const ports = estimatePorts(spec("zip_records"), { fields: ["name", "age"] });
    expect(ports.inputs.map((p) => `${p.name}:${p.type}`)).toEqual(["name:list[Any]", "age:list[Any]"]);
  });

  it("switch: a branch per case plus default; compare: true and false", () => {
    expect(estimatePorts(spec("switch"), { cases: ["billing", "support", "billing"] }).branches).toEqual(["billing", "support", "default"]);
    expect(estimatePorts(spec("compare"), {}).branches).toEqual(["true", "false"]);
  });

  it("an edge's port is pending while the server's answer is awaited, then missing if gone", () => {
    const edges = [{ id: "e", source: "s", target: "t", sourceHandle: "output", targetHandle: "a" }];
    const waiting = withEdgePorts("t", estimatePorts(spec("template"), { template: "{{ b }}" }), edges);
    expect(waiting.inputs.map((p) => [p.name, !!p.pending, !!p.missing])).toEqual([["a", true, false]]);
    expect(waiting.pending).toBe(true);
    const answered: NodePorts = {
      inputs: [{ name: "b", type: "Any", schema: {}, required: true, description: "" }],
      outputs: [],
      branches: null,
    };
    expect(withEdgePorts("t", answered, edges).inputs.map((p) => [p.name, !!p.missing])).toEqual([
      ["b", false],
      ["a", true],
    ]);
  });
});

describe("new nodes and ids", () => {
  it("makes ids unique and valid", () => {
    const taken = new Set(["template", "template_2"]);
    expect(uniqueId("template", taken)).toBe("template_3");
    expect(uniqueId("template_2", taken)).toBe("template_3");
    expect(uniqueId("9lives", new Set())).toBe("n_9lives");
    expect(uniqueId("a b", new Set())).toBe("a_b");
  });

  it("a dropped input gets a free input name; required config is filled", () => {
    const first = newNode(spec("text_input"), { x: 1, y: 2 }, [], blocks);
    expect(first.id).toBe("text_input");
    expect(first.data.config).toEqual({ name: "input" });
    const second = newNode(spec("text_input"), { x: 1, y: 2 }, [first], blocks);
    expect(second.id).toBe("text_input_2");
    expect(second.data.config).toEqual({ name: "input_2" });
    expect(newNode(spec("switch"), { x: 0, y: 0 }, [], blocks).data.config).toEqual({ cases: [] });
    expect(newNode(spec("template"), { x: 0, y: 0 }, [], blocks).data.config).toEqual({ template: "" });
  });
});

describe("auto-layout", () => {
  it("places each node right of the nodes feeding it", () => {
    const graph = flowToGraph({ ...hello, nodes: hello.nodes!.map(({ position: _p, ...n }) => n) }, blocks);
    const pos = layoutGraph(graph.nodes, graph.edges);
    expect(pos.size).toBe(4);
    expect(pos.get("name")!.x).toBeLessThan(pos.get("greet")!.x);
    expect(pos.get("greet")!.x).toBeLessThan(pos.get("route")!.x);
    expect(pos.get("route")!.x).toBeLessThan(pos.get("greeting")!.x);
  });
});
