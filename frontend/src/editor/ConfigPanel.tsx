// The right-hand panel: the selected node's settings (a form from its block's JSON Schema),
// its ports and problems; with nothing selected, the flow's name and description.

import { memo, useMemo, useState } from "react";
import type { BlockSpec, ErrorPolicy, Problem } from "../api/types";
import { SchemaForm } from "../forms/SchemaForm";
import { McpToolPicker } from "../forms/McpToolPicker";
import { ModelPicker } from "../forms/ModelPicker";
import { blockIcon, blockKind, blockTitle } from "./blockTitle";
import { ErrorPolicyField } from "./ErrorPolicyField";
import type { EditorNode } from "./graph";
import { NODE_ID_RE } from "./graph";
import { typeColour } from "./portColour";

interface Props {
  node: EditorNode | null;
  spec: BlockSpec | undefined;
  secrets: string[];
  problems: Problem[];
  portsError: string | null;
  onConfig: (id: string, config: Record<string, unknown>, field: string) => void;
  onRename: (id: string, next: string) => string | null;
  onLabel: (id: string, label: string) => void;
  onTimeout: (id: string, timeout: number | undefined) => void;
  onErrorPolicy?: (id: string, policy: ErrorPolicy | undefined) => void;
}

/** invalid_config messages name their field ("config field 'url': ..." from validation,
 *  "template: ..." from the ports call): each is shown by that field. */
export function fieldErrorsOf(problems: Problem[], fields: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const p of problems) {
    if (p.code !== "invalid_config") continue;
    const quoted = /^config field '([^']+)':\s*(.*)$/s.exec(p.message);
    if (quoted && fields.includes(quoted[1].split(".")[0])) {
      out[quoted[1].split(".")[0]] = quoted[2];
      continue;
    }
    const field = fields.find((f) => p.message.startsWith(`${f}:`) || p.port === f);
    if (field) out[field] = p.message.startsWith(`${field}:`) ? p.message.slice(field.length + 1).trim() : p.message;
  }
  return out;
}

export const ConfigPanel = memo(function ConfigPanel({ node, spec, secrets, problems, portsError, onConfig, onRename, onLabel, onTimeout, onErrorPolicy }: Props) {
  if (!node) return null;
  const fields = Object.keys(spec?.config_schema.properties ?? {});
  // A problem with a field is shown by that field only: not a second time up here, nor again
  // as the ports call's refusal (the same parse error, from the other endpoint).
  const unplaced = problems.filter((p) => Object.keys(fieldErrorsOf([p], fields)).length === 0);
  return (
    <div className="config-panel" data-testid="config-panel" data-node={node.id}>
      <NodeHeader node={node} spec={spec} onRename={onRename} onLabel={onLabel} />
      {unplaced.length > 0 && (
        <ul className="problem-list compact" data-testid="node-problems">
          {unplaced.map((p, i) => (
            <li key={i} className={`problem problem-${p.severity}`} title={p.code}>
              {p.port && <span className="problem-port">{p.port}: </span>}
              {p.message}
            </li>
          ))}
        </ul>
      )}
      {spec ? (
        <>
          <h4>Settings</h4>
          <ConfigForm node={node} spec={spec} secrets={secrets} problems={problems} fields={fields} onConfig={onConfig} />
          {portsError && unplaced.length === problems.length && (
            <div className="field-message" data-testid="ports-error">
              {portsError}
            </div>
          )}
          <h4>Ports</h4>
          <PortTable node={node} />
          <TimeoutField node={node} onTimeout={onTimeout} />
          {onErrorPolicy && <ErrorPolicyField node={node} onErrorPolicy={onErrorPolicy} />}
          {spec.doc && (
            <details className="block-doc">
              <summary>About {spec.name}</summary>
              <pre>{spec.doc}</pre>
            </details>
          )}
        </>
      ) : (
        <p className="field-message">The block “{node.data.block}” is not in this server's registry.</p>
      )}
    </div>
  );
});

function ConfigForm({ node, spec, secrets, problems, fields, onConfig }: {
  node: EditorNode;
  spec: BlockSpec;
  secrets: string[];
  problems: Problem[];
  fields: string[];
  onConfig: Props["onConfig"];
}) {
  const fieldErrors = useMemo(() => fieldErrorsOf(problems, fields), [problems, fields]);
  const id = node.id;
  const config = node.data.config;
  // A model block: what matters (the prompt, the model) first; the tuning knobs fold away.
  const fold = useMemo(() => {
    if (spec.category !== "llm") return undefined;
    const required = spec.config_schema.required ?? [];
    const hasModel = fields.includes("provider") && fields.includes("model");
    const pick = (provider: string | null, model: string | null) => {
      const next = { ...config };
      if (provider === null) delete next.provider;
      else next.provider = provider;
      if (model === null) delete next.model;
      else next.model = model;
      onConfig(id, next, "provider");
    };
    return {
      keep: ["prompt", ...required.filter((f) => f !== "prompt")],
      extra: hasModel ? <ModelPicker provider={config.provider} model={config.model} onPick={pick} /> : undefined,
    };
  }, [spec, fields, config, id, onConfig]);
  return (
    <>
      <SchemaForm
        key={id}
        schema={spec.config_schema}
        value={config}
        secrets={secrets}
        fieldErrors={fieldErrors}
        fold={fold}
        onChange={(next, field) => onConfig(id, next, field)}
      />
      {spec.name === "mcp_tool" && (
        <McpToolPicker key={`${id}-mcp`} config={config} onPick={(tool) => onConfig(id, { ...config, tool }, "tool")} />
      )}
    </>
  );
}

function NodeHeader({ node, spec, onRename, onLabel }: { node: EditorNode; spec: BlockSpec | undefined; onRename: Props["onRename"]; onLabel: Props["onLabel"] }) {
  const [idText, setIdText] = useState(node.id);
  const [idError, setIdError] = useState<string | null>(null);
  const [shownId, setShownId] = useState(node.id);
  if (shownId !== node.id) {
    // Another node (or this one renamed): its id replaces what was being typed.
    setShownId(node.id);
    setIdText(node.id);
    setIdError(null);
  }
  const commitId = () => {
    if (idText === node.id) return;
    if (!NODE_ID_RE.test(idText)) {
      setIdError("letters, digits, _ and -, starting with a letter or _ (at most 64)");
      return;
    }
    const err = onRename(node.id, idText);
    setIdError(err);
  };
  return (
    <div className="node-header">
      <div className="node-header-block">
        <span className={`cat-dot cat-${spec?.category ?? "unknown"}`} />
        <strong data-testid="node-block-title">
          {blockIcon(spec)} {blockTitle(node.data.block)}
        </strong>
        <span className="muted small" data-testid="node-block-kind">
          {" "}
          {blockKind(spec)} · <code>{node.data.block}</code>
        </span>
      </div>
      {spec && <p className="muted small">{spec.description}</p>}
      <div className="field">
        <label className="field-title" htmlFor="node-id-input">
          Node id
        </label>
        <input
          id="node-id-input"
          className={`input mono${idError ? " input-invalid" : ""}`}
          data-testid="node-id"
          value={idText}
          onChange={(e) => setIdText(e.target.value)}
          onBlur={commitId}
          onKeyDown={(e) => {
            if (e.key === "Enter") commitId();
          }}
        />
        {idError && <div className="field-message">{idError}</div>}
      </div>
      <div className="field">
        <label className="field-title" htmlFor="node-label-input">
          Label
        </label>
        <input
          id="node-label-input"
          className="input"
          data-testid="node-label"
          placeholder="shown on the canvas"
          value={node.data.label ?? ""}
          onChange={(e) => onLabel(node.id, e.target.value)}
        />
      </div>
    </div>
  );
}

function PortTable({ node }: { node: EditorNode }) {
  const { inputs, outputs, branches } = node.data.ports;
  return (
    <table className="port-table">
      <tbody>
        {inputs.map((p) => (
          <tr key={`in-${p.name}`} className={p.missing ? "port-missing" : ""}>
            <td>in</td>
            <td className="mono">{p.name}</td>
            <td className="mono" style={{ color: typeColour(p.type) }}>
              {p.type}
            </td>
            <td className="muted small">{p.missing ? "not a port of this block" : p.required ? "required" : "optional"}</td>
          </tr>
        ))}
        {outputs.map((p) => (
          <tr key={`out-${p.name}`}>
            <td>out</td>
            <td className="mono">{p.name}</td>
            <td className="mono" style={{ color: typeColour(p.type) }}>
              {p.type}
            </td>
            <td className="muted small">{branches ? `branches: ${branches.join(", ")}` : ""}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function TimeoutField({ node, onTimeout }: { node: EditorNode; onTimeout: Props["onTimeout"] }) {
  const stored = node.data.timeout === undefined ? "" : String(node.data.timeout);
  const [text, setText] = useState(stored);
  const [shownFor, setShownFor] = useState({ id: node.id, stored });
  if (shownFor.id !== node.id || shownFor.stored !== stored) {
    setShownFor({ id: node.id, stored });
    setText(stored);
  }
  const n = Number(text);
  const bad = text.trim() !== "" && (Number.isNaN(n) || n <= 0);
  return (
    <div className="field">
      <label className="field-title" htmlFor="node-timeout-input">
        Timeout (seconds)
      </label>
      <input
        id="node-timeout-input"
        className={`input${bad ? " input-invalid" : ""}`}
        data-testid="node-timeout"
        inputMode="decimal"
        placeholder="the block's own"
        value={text}
        onChange={(e) => {
          setText(e.target.value);
          const v = e.target.value.trim();
          const num = Number(v);
          if (v === "") onTimeout(node.id, undefined);
          else if (!Number.isNaN(num) && num > 0) onTimeout(node.id, num);
        }}
      />
      {bad && <div className="field-message">a number of seconds above 0</div>}
    </div>
  );
}

export const ProblemsList = memo(function ProblemsList({ problems, hidden = 0, onSelect }: { problems: Problem[]; hidden?: number; onSelect: (node: string) => void }) {
  // Shown before the user validates, saves or runs: the rest wait for the blocks they are on.
  const waiting =
    hidden > 0 ? (
      <p className="muted small" data-testid="problems-hidden">
        {hidden} more on blocks you have not worked on yet: Validate shows them.
      </p>
    ) : null;
  if (problems.length === 0)
    return (
      <>
        <p className="muted" data-testid="problems-empty">
          No problems.
        </p>
        {waiting}
      </>
    );
  return (
    <>
      <ul className="problem-list" data-testid="problems">
        {problems.map((p, i) => (
          <li key={i} className={`problem problem-${p.severity}`} data-testid="problem" title={p.code}>
            <span className={`sev sev-${p.severity}`}>{p.severity === "error" ? "✕" : "!"}</span>
            {p.node ? (
              <button className="link" onClick={() => onSelect(p.node!)}>
                {p.node}
                {p.port ? ` (${p.port})` : ""}
              </button>
            ) : (
              <span className="muted">The flow</span>
            )}
            : {p.message}
          </li>
        ))}
      </ul>
      {waiting}
    </>
  );
});
