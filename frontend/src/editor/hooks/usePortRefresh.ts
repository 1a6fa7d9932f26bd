// The ports of blocks whose ports depend on their config (template variables, a condition's
// branches): the server's answer, for one node after an edit settles (POST
// /api/v1/blocks/{block}/ports), and in one call (POST /api/v1/blocks/ports) for every such
// node when the flow opens and for any node whose ports are pending otherwise (a paste, an
// undo to before an answer). Until it arrives a template node's ports are `pending`
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
  // Nodes asked about in a batch call still out, and those calls.
  const batched = useRef(new Set<string>());
  const batches = useRef(new Set<AbortController>());
  const opened = useRef(false);

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

  // The server refused the node's config: its ports are no longer pending (an edge naming a
  // port the block lacks shows as missing), so nothing asks again until the next edit.
  const settle = useCallback(
    (id: string, config: Record<string, unknown>) =>
      replace((g) => ({
        ...g,
        nodes: g.nodes.map((n) => {
          if (n.id !== id || n.data.config !== config || !n.data.ports.pending) return n;
          const { pending: _pending, ...known } = n.data.ports;
          const ports = withEdgePorts(id, { ...known, inputs: known.inputs.filter((p) => !p.pending) }, g.edges);
          return { ...n, data: { ...n.data, ports } };
        }),
      })),
    [replace],
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
            if (e instanceof ApiError && e.status !== 0) {
              setPortsErrors((errs) => ({ ...errs, [id]: `${e.code}: ${e.message}` }));
              settle(id, config);
            }
          } finally {
            if (calls.current.get(id) === call) calls.current.delete(id);
          }
        }, delay),
      );
    },
    [applyPorts, blocks, graphRef, settle],
  );

  useEffect(() => {
    const pending = timers.current;
    const inFlight = calls.current;
    const inBatches = batches.current;
    const asked = batched.current;
    return () => {
      pending.forEach((t) => clearTimeout(t));
      inFlight.forEach((c) => c.abort());
      inBatches.forEach((c) => c.abort());
      // Forgotten at once, not when the aborted calls settle: a remount (React's strict
      // mode does one) asks again.
      asked.clear();
      opened.current = false;
    };
  }, []);

  // One call for the nodes nobody is asking about: when the flow opens, every dynamic node
  // (the editor mounts once per document); later, any whose ports are pending with no call of
  // its own coming (pasted, or an undo to before an answer). An edit asks on its own.
  useEffect(() => {
    const first = !opened.current;
    opened.current = true;
    const asked = new Map<string, EditorNode>();
    for (const n of nodes) {
      if (!needsServerPorts(blocks.get(n.data.block)) || !(first || n.data.ports.pending)) continue;
      if (timers.current.has(n.id) || calls.current.has(n.id) || batched.current.has(n.id)) continue;
      asked.set(n.id, n);
    }
    if (asked.size === 0) return;
    for (const id of asked.keys()) batched.current.add(id);
    const call = new AbortController();
    batches.current.add(call);
    const body = Object.fromEntries([...asked].map(([id, n]) => [id, { block: n.data.block, config: n.data.config }]));
    // An answer counts only for the config it was asked about (edited since: a newer call).
    const stillCurrent = (id: string) =>
      !call.signal.aborted && graphRef.current.nodes.find((n) => n.id === id)?.data.config === asked.get(id)?.data.config;
    api
      .nodesPorts(body, { signal: call.signal })
      .then(
        (answer) => {
          for (const id of asked.keys()) batched.current.delete(id);
          for (const [id, ports] of Object.entries(answer.ports)) {
            const was = asked.get(id);
            if (was && stillCurrent(id)) applyPorts(id, was.data.config, ports, blocks.get(was.data.block));
          }
          const refused = Object.entries(answer.errors).filter(([id]) => stillCurrent(id));
          if (refused.length) setPortsErrors((errs) => ({ ...errs, ...Object.fromEntries(refused.map(([id, e]) => [id, `${e.code}: ${e.message}`])) }));
          for (const [id] of refused) settle(id, asked.get(id)!.data.config);
        },
        // Unanswered (the server is away, or the editor closed): still pending, and not asked
        // again on every change of the canvas (a drag is many): a node's edit asks anew.
        () => undefined,
      )
      .finally(() => batches.current.delete(call));
  }, [nodes, blocks, applyPorts, settle, graphRef]);

  return { portsErrors, refreshPorts };
}
