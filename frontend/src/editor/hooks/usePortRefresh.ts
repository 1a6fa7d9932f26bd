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
  /** The graph's nodes as rendered: a refusal is kept only for a node still there. */
  nodes: Graph["nodes"];
  metaRef: RefObject<FlowMeta>;
  blocks: Registry["byName"];
  replace: (fn: (g: Graph) => Graph) => void;
  selectedId: string | null;
}): PortRefresh {
  const { graphRef, nodes, metaRef, blocks, replace, selectedId } = args;
  const [portsErrors, setPortsErrors] = useState<Record<string, string>>({});
  const timers = useRef(new Map<string, ReturnType<typeof setTimeout>>());
  const calls = useRef(new Map<string, AbortController>());

  // A node deleted or renamed takes its refusal with it (checked only while there is one).
  const gone = Object.keys(portsErrors).filter((id) => !nodes.some((n) => n.id === id));
  if (gone.length > 0) {
    setPortsErrors((errs) => {
      const next = { ...errs };
      for (const id of gone) delete next[id];
      return next;
    });
  }

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
          // The node's earlier call, if still out, answers for an older config: cancel it.
          calls.current.get(id)?.abort();
          const call = new AbortController();
          calls.current.set(id, call);
          // An answer counts only for the config it was asked about: edited since, a newer
          // call follows (the same for a refusal, which must not hide a newer success).
          const stillCurrent = () => !call.signal.aborted && graphRef.current.nodes.find((n) => n.id === id)?.data.config === config;
          try {
            const ports = await api.ports(current.data.block, config, { signal: call.signal });
            if (!stillCurrent()) return;
            applyPorts(id, config, ports, spec);
            setPortsErrors((errs) => {
              if (!(id in errs)) return errs;
              const next = { ...errs };
              delete next[id];
              return next;
            });
          } catch (e) {
            if (!stillCurrent()) return;
            if (e instanceof ApiError && e.status !== 0) setPortsErrors((errs) => ({ ...errs, [id]: `${e.code}: ${e.message}` }));
          } finally {
            if (calls.current.get(id) === call) calls.current.delete(id);
          }
        }, delay),
      );
    },
    [applyPorts, blocks, graphRef],
  );

  useEffect(() => {
    const pending = timers.current;
    const inFlight = calls.current;
    return () => {
      pending.forEach((t) => clearTimeout(t));
      inFlight.forEach((c) => c.abort());
    };
  }, []);

  // A node's ports are asked once when it is first selected (a flow opened from a version
  // shows estimated ports until then). Ids no longer in the graph (renamed or deleted nodes)
  // are forgotten, so the set does not grow with every name a node ever had.
  const refreshedOnSelect = useRef(new Set<string>());
  useEffect(() => {
    if (!selectedId) return;
    const asked = refreshedOnSelect.current;
    const ids = new Set(graphRef.current.nodes.map((n) => n.id));
    for (const id of asked) if (!ids.has(id)) asked.delete(id);
    if (!asked.has(selectedId)) {
      asked.add(selectedId);
      refreshPorts(selectedId, 0);
    }
  }, [selectedId, refreshPorts, graphRef]);

  return { portsErrors, refreshPorts };
}
