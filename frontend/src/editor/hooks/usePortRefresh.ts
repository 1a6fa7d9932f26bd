// The ports of blocks whose ports depend on their config (template variables, a condition's
// branches): the server's answer, for every such node at once when the flow opens (POST
// /api/v1/blocks/ports) and for one node after an edit settles (POST
// /api/v1/blocks/{block}/ports). Until it arrives a template node's ports are `pending`
// (graph.ts): the editor reads no template itself. A port an edge still names after it
// disappeared stays, marked missing, until the edge is deleted.

import { type RefObject, useCallback, useEffect, useRef, useState } from "react";
import { api } from "../../api/client";
import { ApiError } from "../../api/transport";
import type { BlockPorts, BlockSpec } from "../../api/types";
import { type EditorNode, type Graph, isCondition, withEdgePorts, withPolicyPorts, withSubflowPorts } from "../graph";
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
}): PortRefresh {
  const { graphRef, nodes, metaRef, blocks, replace } = args;
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

  // The flow opens (the editor mounts once per document): every dynamic node's ports in one
  // call. A node edited meanwhile keeps its own call's answer.
  useEffect(() => {
    const asked = new Map<string, EditorNode>();
    for (const n of graphRef.current.nodes) if (needsServerPorts(blocks.get(n.data.block))) asked.set(n.id, n);
    if (asked.size === 0) return;
    const controller = new AbortController();
    const nodes = Object.fromEntries([...asked].map(([id, n]) => [id, { block: n.data.block, config: n.data.config }]));
    api.nodesPorts(nodes, { signal: controller.signal }).then(
      (answer) => {
        for (const [id, ports] of Object.entries(answer.ports)) {
          const now = graphRef.current.nodes.find((n) => n.id === id);
          const was = asked.get(id);
          if (now && was && now.data.config === was.data.config) applyPorts(id, was.data.config, ports, blocks.get(was.data.block));
        }
        const refused = Object.entries(answer.errors);
        if (refused.length) setPortsErrors((errs) => ({ ...errs, ...Object.fromEntries(refused.map(([id, e]) => [id, `${e.code}: ${e.message}`])) }));
      },
      // Unanswered (the server is away, or the editor closed): the ports stay pending.
      () => undefined,
    );
    return () => controller.abort();
    // Once per document: a later document remounts the editor.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, []);

  return { portsErrors, refreshPorts };
}
