// The ports of blocks whose ports depend on their config (template variables, a condition's
// branches): the server's answer (POST /api/v1/blocks/{block}/ports), asked after an edit
// settles and when a node is first selected. A port an edge still names after it disappeared
// stays, marked missing, until the edge is deleted.

import { type RefObject, useCallback, useEffect, useRef, useState } from "react";
import { api } from "../../api/client";
import { ApiError } from "../../api/transport";
import type { BlockPorts, BlockSpec } from "../../api/types";
import { type Graph, isCondition, withEdgePorts, withPolicyPorts, withSubflowPorts } from "../graph";
import type { Registry } from "../registry";
import type { FlowMeta } from "./useFlowDocument";

export function needsServerPorts(spec: BlockSpec | undefined): boolean {
  return !!spec && (!!spec.dynamic_inputs || spec.branches === null);
}

export interface PortRefresh {
  /** The ports call's refusal per node id ("code: message"). */
  portsErrors: Record<string, string>;
  /** Ask the server for this node's ports after `delay` ms (a newer call replaces it). */
  refreshPorts: (id: string, delay?: number) => void;
}

export function usePortRefresh(args: {
  graphRef: RefObject<Graph>;
  metaRef: RefObject<FlowMeta>;
  blocks: Registry["byName"];
  replace: (fn: (g: Graph) => Graph) => void;
  selectedId: string | null;
}): PortRefresh {
  const { graphRef, metaRef, blocks, replace, selectedId } = args;
  const [portsErrors, setPortsErrors] = useState<Record<string, string>>({});
  const timers = useRef(new Map<string, ReturnType<typeof setTimeout>>());

  const applyPorts = useCallback(
    (id: string, config: Record<string, unknown>, ports: BlockPorts, spec: BlockSpec | undefined) =>
      replace((g) => ({
        ...g,
        nodes: g.nodes.map((n) =>
          n.id === id
            ? {
                ...n,
                data: {
                  ...n.data,
                  ports: withEdgePorts(
                    id,
                    withSubflowPorts(
                      withPolicyPorts({ inputs: ports.inputs, outputs: ports.outputs, branches: isCondition(spec) ? ports.branches : null }, n.data.on_error),
                      n.data.block,
                      config,
                      metaRef.current.subflows,
                      blocks,
                    ),
                    g.edges,
                  ),
                },
              }
            : n,
        ),
      })),
    [blocks, metaRef, replace],
  );

  const refreshPorts = useCallback(
    (id: string, delay = 350) => {
      const node = graphRef.current.nodes.find((n) => n.id === id);
      const spec = node && blocks.get(node.data.block);
      if (!node || !needsServerPorts(spec)) return;
      const pending = timers.current;
      const old = pending.get(id);
      if (old) clearTimeout(old);
      pending.set(
        id,
        setTimeout(async () => {
          pending.delete(id);
          const current = graphRef.current.nodes.find((n) => n.id === id);
          if (!current) return;
          const config = current.data.config;
          try {
            const ports = await api.ports(current.data.block, config);
            const now = graphRef.current.nodes.find((n) => n.id === id);
            if (!now || now.data.config !== config) return; // edited since: a newer call follows
            applyPorts(id, config, ports, spec);
            setPortsErrors((errs) => {
              if (!(id in errs)) return errs;
              const next = { ...errs };
              delete next[id];
              return next;
            });
          } catch (e) {
            if (e instanceof ApiError && e.status !== 0) setPortsErrors((errs) => ({ ...errs, [id]: `${e.code}: ${e.message}` }));
          }
        }, delay),
      );
    },
    [applyPorts, blocks, graphRef],
  );

  useEffect(() => {
    const pending = timers.current;
    return () => pending.forEach((t) => clearTimeout(t));
  }, []);

  // A node's ports are asked once when it is first selected (a flow opened from a version
  // shows estimated ports until then).
  const refreshedOnSelect = useRef(new Set<string>());
  useEffect(() => {
    if (selectedId && !refreshedOnSelect.current.has(selectedId)) {
      refreshedOnSelect.current.add(selectedId);
      refreshPorts(selectedId, 0);
    }
  }, [selectedId, refreshPorts]);

  return { portsErrors, refreshPorts };
}
