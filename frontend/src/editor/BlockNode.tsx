// One node on the canvas: memoised and light (a header, one row per port), coloured by
// category, its ports by type; validation problems, run state and diff marks come from the
// decoration store so they re-draw this node only.

import { Handle, type NodeProps, Position, useUpdateNodeInternals } from "@xyflow/react";
import { type CSSProperties, createContext, memo, useContext, useEffect, useRef } from "react";
import type { NodeRunState, Problem } from "../api/types";
import { blockIcon, blockTitle } from "./blockTitle";
import { useNodeDecoration } from "./decorations";
import type { BlockMap, EditorNode, NodePort } from "./graph";
import { sourceHandleId } from "./graph";
import { typeColour } from "./portColour";

export const BlocksContext = createContext<BlockMap>(new Map());

const STATUS_ICON: Record<NodeRunState["status"], string> = {
  pending: "○",
  running: "◌",
  succeeded: "✓",
  skipped: "⤼",
  failed: "✕",
  cancelled: "⊘",
  reused: "↺",
  waiting: "⏸",
};

export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
}

function portProblem(problems: Problem[], port: string): Problem | undefined {
  return problems.find((p) => p.port === port);
}

function PortRow({ port, side, problem, handleId, label, testId }: {
  port: NodePort;
  side: "in" | "out";
  problem?: Problem;
  handleId: string;
  label: string;
  testId: string;
}) {
  const colour = port.missing ? "#d33" : typeColour(port.type);
  const title = `${label}: ${port.type}${port.required && side === "in" ? " (required)" : ""}${port.description ? ` — ${port.description}` : ""}${problem ? `\n⚠ ${problem.message}` : ""}`;
  return (
    <div className={`port-row port-${side}${problem ? " port-problem" : ""}${port.missing ? " port-missing" : ""}${port.pending ? " port-pending" : ""}`} title={title} data-type={port.type} style={{ "--pc": colour } as CSSProperties}>
      <Handle
        type={side === "in" ? "target" : "source"}
        position={side === "in" ? Position.Left : Position.Right}
        id={handleId}
        className="port-handle"
        data-testid={testId}
        data-port-type={port.type}
      />
      {label}
    </div>
  );
}

function BlockNodeView({ id, data, selected }: NodeProps<EditorNode>) {
  const blocks = useContext(BlocksContext);
  const deco = useNodeDecoration(id);
  const spec = blocks.get(data.block);
  const category = spec?.category ?? "unknown";
  const errors = deco.problems.filter((p) => p.severity === "error");
  const warnings = deco.problems.filter((p) => p.severity !== "error");
  const run = deco.run;
  const { inputs, outputs, branches } = data.ports;
  // Ports renamed without the node changing size: xyflow must re-read the handles.
  const updateNodeInternals = useUpdateNodeInternals();
  const portsKey = `${inputs.map((p) => p.name).join(",")}|${outputs.map((p) => p.name).join(",")}|${branches?.join(",") ?? ""}`;
  const firstPorts = useRef(portsKey);
  useEffect(() => {
    if (firstPorts.current === portsKey) return;
    firstPorts.current = portsKey;
    updateNodeInternals(id);
  }, [id, portsKey, updateNodeInternals]);
  const classes = [
    "dw-node",
    `cat-${category}`,
    selected ? "selected" : "",
    run ? `run-${run.status}` : "",
    deco.diff ? `ndiff-${deco.diff}` : "",
    errors.length ? "has-errors" : "",
    spec ? "" : "unknown-block",
  ].join(" ");
  const nodeProblems = deco.problems.filter((p) => !p.port).sort((a, b) => (a.severity === "error" ? 0 : 1) - (b.severity === "error" ? 0 : 1));
  const title = data.label ? data.label : id;
  const human = `${blockIcon(spec)} ${blockTitle(data.block)}`;
  const configName = spec && (spec.role === "flow_input" || spec.role === "flow_output") && typeof data.config.name === "string" ? data.config.name : null;
  return (
    <div
      className={classes}
      data-testid={`node-${id}`}
      data-block={data.block}
      data-status={run?.status}
      data-ports={data.ports.pending ? "pending" : undefined}
      aria-busy={data.ports.pending ? true : undefined}
    >
      <div className="dw-node-head">
        <span className="dw-node-title" title={id}>
          {title}
        </span>
        {errors.length > 0 && (
          <span className="badge badge-error" data-testid={`node-${id}-problems`} title={deco.problems.map((p) => p.message).join("\n")}>
            {errors.length}
          </span>
        )}
        {errors.length === 0 && warnings.length > 0 && (
          <span className="badge badge-warning" data-testid={`node-${id}-problems`} title={warnings.map((p) => p.message).join("\n")}>
            !
          </span>
        )}
        {run && (
          <span className={`run-status run-status-${run.status}`} data-testid={`node-${id}-status`} title={run.error ?? run.status}>
            {STATUS_ICON[run.status] ?? "?"}
            {run.durationMs !== undefined && <span className="run-duration">{formatDuration(run.durationMs)}</span>}
          </span>
        )}
      </div>
      <div className="dw-node-sub">
        {configName ? `${human} · ${configName}` : human}
        {deco.diff && <span className={`diff-tag diff-tag-${deco.diff}`}>{deco.diff}</span>}
      </div>
      {nodeProblems.length > 0 && errors.length > 0 && (
        <div className="dw-node-problem" title={nodeProblems.map((p) => p.message).join("\n")}>
          {nodeProblems[0].message}
        </div>
      )}
      {run?.status === "failed" && run.error && <div className="dw-node-problem">{run.error}</div>}
      {run?.status === "waiting" && <div className="dw-node-waiting">waiting for input</div>}
      <div className="dw-node-ports">
        {inputs.map((p) => (
          <PortRow key={`in-${p.name}`} port={p} side="in" problem={portProblem(deco.problems, p.name)} handleId={p.name} label={p.name} testId={`port-${id}-in-${p.name}`} />
        ))}
        {branches
          ? outputs.flatMap((p) =>
              branches.map((b) => (
                <PortRow
                  key={`br-${p.name}-${b}`}
                  port={p}
                  side="out"
                  handleId={sourceHandleId(p.name, b)}
                  label={outputs.length > 1 ? `${p.name}: ${b}` : b}
                  testId={outputs.length > 1 ? `port-${id}-branch-${p.name}-${b}` : `port-${id}-branch-${b}`}
                />
              )),
            )
          : outputs.map((p) => (
              <PortRow key={`out-${p.name}`} port={p} side="out" problem={portProblem(deco.problems, p.name)} handleId={p.name} label={p.name} testId={`port-${id}-out-${p.name}`} />
            ))}
      </div>
    </div>
  );
}

export const BlockNode = memo(BlockNodeView);
export const nodeTypes = { block: BlockNode };
