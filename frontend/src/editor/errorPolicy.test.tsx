import { cleanup, fireEvent, render, screen } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { FlowDocument } from "../api/types";
import { blocks } from "../test/fixtures";
import { ErrorPolicyField, tidyPolicy } from "./ErrorPolicyField";
import { ERROR_PORT, flowToGraph, withEdgePorts, withPolicyPorts, type EditorNode } from "./graph";

afterEach(cleanup);

const doc: FlowDocument = {
  format: "dagwright.flow",
  version: 1,
  nodes: [
    { id: "greet", block: "template", config: { template: "Hi {{ name }}" }, on_error: { fallback: "error_branch" } },
    { id: "out", block: "output", config: { name: "out" } },
  ],
  edges: [{ source: { node: "greet", port: "error" }, target: { node: "out", port: "value" } }],
};

describe("the error port", () => {
  it("is added by fallback error_branch, so edges from it are real ports", () => {
    const graph = flowToGraph(doc, blocks);
    const error = graph.nodes[0].data.ports.outputs.find((p) => p.name === ERROR_PORT);
    expect(error?.type).toBe("dict[str, Any]");
    expect(error?.missing).toBeUndefined();
  });

  it("goes when the policy stops routing errors; an edge still from it shows as missing", () => {
    const graph = flowToGraph(doc, blocks);
    const ports = withPolicyPorts(graph.nodes[0].data.ports, { retry: 1 });
    expect(ports.outputs.some((p) => p.name === ERROR_PORT)).toBe(false);
    const shown = withEdgePorts("greet", ports, graph.edges);
    expect(shown.outputs.find((p) => p.name === ERROR_PORT)?.missing).toBe(true);
  });
});

describe("the error policy form", () => {
  function node(on_error?: EditorNode["data"]["on_error"]): EditorNode {
    const ports = { inputs: [], outputs: [], branches: null };
    return { id: "greet", type: "block", position: { x: 0, y: 0 }, data: { block: "template", config: {}, ports, on_error } };
  }

  it("sets retries, a fallback and a default, leaving defaults out", () => {
    const onErrorPolicy = vi.fn();
    const { rerender } = render(<ErrorPolicyField node={node()} onErrorPolicy={onErrorPolicy} />);
    fireEvent.change(screen.getByTestId("node-retry"), { target: { value: "2" } });
    expect(onErrorPolicy).toHaveBeenLastCalledWith("greet", { retry: 2 });
    fireEvent.change(screen.getByTestId("node-fallback"), { target: { value: "default" } });
    expect(onErrorPolicy).toHaveBeenLastCalledWith("greet", { fallback: "default" });
    rerender(<ErrorPolicyField node={node({ fallback: "default" })} onErrorPolicy={onErrorPolicy} />);
    fireEvent.change(screen.getByTestId("node-default"), { target: { value: '"unknown"' } });
    expect(onErrorPolicy).toHaveBeenLastCalledWith("greet", { fallback: "default", default: "unknown" });
    fireEvent.change(screen.getByTestId("node-fallback"), { target: { value: "fail" } });
    expect(onErrorPolicy).toHaveBeenLastCalledWith("greet", undefined);
  });

  it("tidies a policy to what differs from the defaults", () => {
    expect(tidyPolicy({ retry: 0, backoff: 0.5, fallback: "fail" })).toBeUndefined();
    expect(tidyPolicy({ retry: 3, backoff: 1, fallback: "error_branch", default: 1 })).toEqual({
      retry: 3,
      backoff: 1,
      fallback: "error_branch",
    });
  });
});
