// The edits the config panel makes to one node: its config (ports pending until the server
// answers: usePortRefresh), label, timeout, error policy and id.

import { type RefObject, useCallback } from "react";
import type { ErrorPolicy } from "../../api/types";
import type { DecorationStore } from "../decorations";
import {
  type Graph,
  type NodeData,
  edgeFromFlow,
  edgeToFlow,
  estimatePorts,
  pendingPorts,
  withEdgePorts,
  withPolicyPorts,
  withSubflowPorts,
} from "../graph";
import type { Registry } from "../registry";
import type { FlowMeta } from "./useFlowDocument";
import { needsServerPorts } from "./usePortRefresh";

export interface NodeEdits {
  onConfig: (id: string, config: Record<string, unknown>, field: string) => void;
  onLabel: (id: string, label: string) => void;
  onTimeout: (id: string, timeout: number | undefined) => void;
  onErrorPolicy: (id: string, policy: ErrorPolicy | undefined) => void;
  /** Renames a node (its edges follow); the reason when the id is taken, else null. */
  onRename: (id: string, next: string) => string | null;
}

/** `data` with `key` set to `value`, or without it when `value` is undefined or "". */
function withOptional<K extends "label" | "timeout" | "on_error">(data: NodeData, key: K, value: NodeData[K] | undefined): NodeData {
  const next = { ...data };
  if (value === undefined || value === "") delete next[key];
  else next[key] = value;
  return next;
}

export function useNodeEdits(args: {
  edit: (fn: (g: Graph) => Graph, coalesceKey?: string) => void;
  graphRef: RefObject<Graph>;
  metaRef: RefObject<FlowMeta>;
  blocks: Registry["byName"];
  decorations: DecorationStore;
  touch: (...ids: string[]) => void;
  refreshPorts: (id: string) => void;
}): NodeEdits {
  const { edit, graphRef, metaRef, blocks, decorations, touch, refreshPorts } = args;

  const onConfig = useCallback(
    (id: string, config: Record<string, unknown>, field: string) => {
      edit(
        (g) => ({
          ...g,
          nodes: g.nodes.map((n) => {
            if (n.id !== id) return n;
            const spec = blocks.get(n.data.block);
            const ports = needsServerPorts(spec)
              ? withEdgePorts(
                  id,
                  withSubflowPorts(
                    withPolicyPorts(pendingPorts(estimatePorts(spec, config), n.data.ports), n.data.on_error),
                    n.data.block,
                    config,
                    metaRef.current.subflows,
                    blocks,
                  ),
                  g.edges,
                )
              : n.data.ports;
            return { ...n, data: { ...n.data, config, ports } };
          }),
        }),
        `config:${id}:${field}`,
      );
      touch(id);
      refreshPorts(id);
    },
    [blocks, edit, metaRef, refreshPorts, touch],
  );

  const onLabel = useCallback(
    (id: string, label: string) =>
      edit((g) => ({ ...g, nodes: g.nodes.map((n) => (n.id === id ? { ...n, data: withOptional(n.data, "label", label) } : n)) }), `label:${id}`),
    [edit],
  );

  const onTimeout = useCallback(
    (id: string, timeout: number | undefined) =>
      edit((g) => ({ ...g, nodes: g.nodes.map((n) => (n.id === id ? { ...n, data: withOptional(n.data, "timeout", timeout) } : n)) }), `timeout:${id}`),
    [edit],
  );

  const onErrorPolicy = useCallback(
    (id: string, policy: ErrorPolicy | undefined) =>
      edit(
        (g) => ({
          ...g,
          nodes: g.nodes.map((n) => {
            if (n.id !== id) return n;
            const data = withOptional(n.data, "on_error", policy);
            data.ports = withEdgePorts(
              id,
              withPolicyPorts(data.ports, policy),
              g.edges.filter((e) => e.source === id || e.target === id),
            );
            return { ...n, data };
          }),
        }),
        `on_error:${id}`,
      ),
    [edit],
  );

  const onRename = useCallback(
    (id: string, next: string): string | null => {
      if (graphRef.current.nodes.some((n) => n.id === next)) return `“${next}” is taken`;
      edit((g) => ({
        nodes: g.nodes.map((n) => (n.id === id ? { ...n, id: next } : n)),
        edges: g.edges.map((e) => {
          if (e.source !== id && e.target !== id) return e;
          const moved = { ...e, source: e.source === id ? next : e.source, target: e.target === id ? next : e.target };
          return { ...moved, id: edgeFromFlow(edgeToFlow(moved)).id };
        }),
      }));
      decorations.clearNode(id);
      touch(next);
      return null;
    },
    [decorations, edit, graphRef, touch],
  );

  return { onConfig, onLabel, onTimeout, onErrorPolicy, onRename };
}
