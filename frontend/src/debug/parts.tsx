// The debug panel's views. Each renders part of a RunState (or the form); none holds run state.

import { Component, useEffect, useRef, type ReactNode } from "react";
import type { NodeRunStatus } from "../api/types";
import { formatCost, formatSeconds, formatTime, totalTokens, type PanelError } from "./format";
import { topLevel } from "./iterations";
import { ganttLayout, overlaps } from "./gantt";
import type { ChatMessage, ChatSetup, FormValues, InputField } from "./inputs";
import { JsonViewer } from "./JsonViewer";
import { asTable, tableOfMessage } from "./table";
import { TableMessages, TableView } from "./TableView";
import { ChartsOf } from "../charts/ChartView";
import { streamedText, type NodeView, type RunPhase, type RunState } from "./runState";
import type { RunRecord } from "./types";

export function StatusDot({ status }: { status: NodeRunStatus | RunPhase | string }) {
  return <span className={`dw-dot dw-s-${status}`} aria-hidden="true" />;
}

export function StatusBadge({ status, testId }: { status: string; testId?: string }) {
  return (
    <span className={`dw-badge dw-s-${status}`} data-testid={testId} data-status={status}>
      {status}
    </span>
  );
}

export function ScriptedLabel() {
  return (
    <span
      className="dw-scripted"
      title="Answered by dagwright's scripted model, not a real model: configure a provider to use one"
    >
      scripted
    </span>
  );
}

// -- errors -----------------------------------------------------------------------------------

export function ErrorBox({
  error,
  onSelectNode,
  onDismiss,
  children,
}: {
  error: PanelError;
  onSelectNode?: (id: string) => void;
  onDismiss?: () => void;
  children?: ReactNode;
}) {
  return (
    <div className="dw-error" role="alert" data-testid="debug-error">
      <div className="dw-error-title">
        {error.title}
        {onDismiss && (
          <button type="button" className="dw-link dw-error-close" onClick={onDismiss}>
            dismiss
          </button>
        )}
      </div>
      <div className="dw-error-message">{error.message}</div>
      {error.problems && error.problems.length > 0 && (
        <ul className="dw-problems">
          {error.problems.map((p, i) => (
            <li key={i} className={`dw-problem-${p.severity}`}>
              {p.node ? (
                <button type="button" className="dw-link" onClick={() => onSelectNode?.(p.node!)}>
                  {p.node}
                  {p.port ? `.${p.port}` : ""}
                </button>
              ) : (
                <span className="dw-muted">flow</span>
              )}{" "}
              <code>{p.code}</code> {p.message}
            </li>
          ))}
        </ul>
      )}
      {children}
    </div>
  );
}

/** Keeps a rendering bug in one view from blanking the whole panel. */
export class ViewBoundary extends Component<{ name: string; children: ReactNode }, { error: Error | null }> {
  state: { error: Error | null } = { error: null };
  static getDerivedStateFromError(error: Error) {
    return { error };
  }
  render() {
    if (this.state.error) {
      return (
        <div className="dw-error" role="alert">
          <div className="dw-error-title">The {this.props.name} could not be shown</div>
          <div className="dw-error-message">{this.state.error.message}</div>
          <button type="button" className="dw-link" onClick={() => this.setState({ error: null })}>
            try again
          </button>
        </div>
      );
    }
    return this.props.children;
  }
}

// -- inputs -----------------------------------------------------------------------------------

export function InputsForm({
  fields,
  values,
  errors,
  onChange,
  onSubmit,
}: {
  fields: InputField[];
  values: FormValues;
  errors: Record<string, string>;
  onChange: (name: string, value: string) => void;
  onSubmit?: () => void;
}) {
  if (fields.length === 0) return <div className="dw-muted">This flow takes no inputs.</div>;
  return (
    <div className="dw-form">
      {fields.map((field) => {
        const id = `dw-input-${field.nodeId}`;
        const value = values[field.name] ?? "";
        const common = {
          id,
          "data-testid": `debug-input-${field.name}`,
          "aria-invalid": errors[field.name] ? true : undefined,
        };
        let control: ReactNode;
        if (field.kind === "boolean") {
          control = (
            <select {...common} value={value} onChange={(e) => onChange(field.name, e.target.value)}>
              {!field.required && (
                <option value="">
                  {field.default !== undefined ? `default (${String(field.default)})` : "not set"}
                </option>
              )}
              <option value="true">true</option>
              <option value="false">false</option>
            </select>
          );
        } else if (field.kind === "number") {
          control = (
            <input
              {...common}
              type="text"
              inputMode="decimal"
              value={value}
              placeholder={field.required ? "a number" : "empty: the default"}
              onChange={(e) => onChange(field.name, e.target.value)}
              onKeyDown={(e) => e.key === "Enter" && onSubmit?.()}
            />
          );
        } else {
          const multiline = field.kind === "json" || value.includes("\n") || value.length > 60;
          control = multiline ? (
            <textarea
              {...common}
              rows={field.kind === "json" ? Math.min(8, Math.max(3, value.split("\n").length)) : 3}
              value={value}
              spellCheck={field.kind === "text"}
              placeholder={placeholder(field)}
              onChange={(e) => onChange(field.name, e.target.value)}
              onKeyDown={(e) => e.key === "Enter" && (e.metaKey || e.ctrlKey) && onSubmit?.()}
            />
          ) : (
            <input
              {...common}
              type="text"
              value={value}
              placeholder={placeholder(field)}
              onChange={(e) => onChange(field.name, e.target.value)}
              onKeyDown={(e) => e.key === "Enter" && onSubmit?.()}
            />
          );
        }
        return (
          <div key={field.name} className="dw-field">
            <label htmlFor={id}>
              <span className="dw-field-name">{field.label}</span>
              <span className="dw-field-kind">
                {field.kind}
                {field.required ? " · required" : ""}
              </span>
            </label>
            {control}
            {field.description && <div className="dw-field-help">{field.description}</div>}
            {errors[field.name] && <div className="dw-field-error">{errors[field.name]}</div>}
          </div>
        );
      })}
    </div>
  );
}

function placeholder(field: InputField): string {
  if (field.kind === "json") return "JSON, e.g. {\"key\": 1}";
  if (field.kind === "list") return "a JSON list, or values separated by commas";
  return field.required ? "" : "empty: the default";
}

// -- chat -------------------------------------------------------------------------------------

export function ChatView({
  setup,
  transcript,
  streaming,
  busy,
  draft,
  onDraft,
  onSend,
  onReset,
}: {
  setup: ChatSetup;
  transcript: ChatMessage[];
  streaming: string; // the pending reply's tokens so far
  busy: boolean;
  draft: string;
  onDraft: (text: string) => void;
  onSend: () => void;
  onReset: () => void;
}) {
  const end = useRef<HTMLDivElement>(null);
  useEffect(() => {
    end.current?.scrollIntoView?.({ block: "nearest" });
  }, [transcript.length, streaming]);
  return (
    <div className="dw-chat">
      <div className="dw-chat-log" aria-live="polite">
        {transcript.length === 0 && (
          <div className="dw-muted">
            {setup.kind === "conversation"
              ? `Each message runs the flow with the conversation so far as "${setup.input}"; "${setup.answer}" is the reply.`
              : `Each message runs the flow with it as "${setup.input}"; "${setup.answer}" is the reply.`}
          </div>
        )}
        {transcript.map((m, i) => (
          <div key={i} className={`dw-msg dw-msg-${m.role}${m.error ? " dw-msg-error" : ""}`}>
            <div className="dw-msg-role">
              {m.role}
              {m.scripted && <ScriptedLabel />}
            </div>
            <div className="dw-msg-text">
              {m.pending ? (
                streaming ? (
                  <>
                    {streaming}
                    <span className="dw-caret" />
                  </>
                ) : (
                  <span className="dw-muted">running…</span>
                )
              ) : m.error ? (
                m.error
              ) : (
                m.content
              )}
            </div>
          </div>
        ))}
        <div ref={end} />
      </div>
      <div className="dw-chat-compose">
        <textarea
          data-testid="chat-input"
          rows={2}
          value={draft}
          placeholder="Message (Enter to send, Shift+Enter for a new line)"
          onChange={(e) => onDraft(e.target.value)}
          onKeyDown={(e) => {
            if (e.key === "Enter" && !e.shiftKey) {
              e.preventDefault();
              if (!busy && draft.trim()) onSend();
            }
          }}
        />
        <div className="dw-chat-buttons">
          <button
            type="button"
            data-testid="chat-send"
            className="dw-primary"
            disabled={busy || !draft.trim()}
            onClick={onSend}
          >
            Send
          </button>
          <button type="button" disabled={busy || transcript.length === 0} onClick={onReset}>
            New chat
          </button>
        </div>
      </div>
    </div>
  );
}

// -- nodes ------------------------------------------------------------------------------------

export function NodeList({
  run,
  labels,
  selected,
  onSelect,
}: {
  run: RunState;
  labels: Record<string, string>;
  selected: string | null;
  onSelect: (id: string) => void;
}) {
  if (run.order.length === 0) return <div className="dw-muted">The flow has no nodes yet.</div>;
  return (
    <ul className="dw-nodes" role="listbox" aria-label="Nodes of the run">
      {topLevel(run.order).map((id) => {
        const node = run.nodes[id];
        const tokens = totalTokens(node.usage);
        return (
          <li
            key={id}
            role="option"
            aria-selected={selected === id}
            className={`dw-node-row${selected === id ? " dw-selected" : ""}`}
            data-testid={`debug-node-${id}`}
            data-status={node.status}
            onClick={() => onSelect(id)}
          >
            <StatusDot status={node.status} />
            <span className="dw-node-id">{labels[id] ?? id}</span>
            <span className="dw-node-block">{node.block ?? ""}</span>
            <span className="dw-node-meta">
              {node.scripted && <ScriptedLabel />}
              {tokens > 0 && <span title="tokens">{tokens} tok</span>}
              {node.duration !== null && <span>{formatSeconds(node.duration)}</span>}
              {node.status === "running" && node.tokens.length > 0 && <span className="dw-caret" />}
            </span>
          </li>
        );
      })}
    </ul>
  );
}

export function NodeInspector({
  node,
  label,
  inFlow,
  canRerun,
  rerunHint,
  onRerun,
}: {
  node: NodeView;
  label: string;
  inFlow: boolean;
  canRerun: boolean;
  rerunHint: string;
  onRerun: () => void;
}) {
  const streamed = streamedText(node);
  const usage = node.usage;
  const outputTable = node.hasOutput ? asTable(node.output) : null;
  const messages = node.messages.filter((m) => tableOfMessage(m) === null);
  return (
    <div className="dw-inspector" data-testid="debug-inspector">
      <div className="dw-inspector-head">
        <strong className="dw-inspector-title">{label}</strong>
        {label !== node.id && <span className="dw-muted">{node.id}</span>}
        {node.block && <code className="dw-block">{node.block}</code>}
        <StatusBadge status={node.status} />
        {node.scripted && <ScriptedLabel />}
        <span className="dw-spacer" />
        <button
          type="button"
          data-testid="rerun-from-node"
          disabled={!canRerun}
          title={rerunHint}
          onClick={onRerun}
        >
          Run from here
        </button>
      </div>
      {!inFlow && <div className="dw-note">This node is not in the current flow.</div>}
      <dl className="dw-stats">
        <dt>duration</dt>
        <dd>{formatSeconds(node.duration)}</dd>
        {node.started !== null && (
          <>
            <dt>started</dt>
            <dd>+{formatSeconds(node.started)}</dd>
          </>
        )}
        {usage && (
          <>
            <dt>tokens</dt>
            <dd>
              {usage.prompt_tokens} prompt / {usage.completion_tokens} completion
            </dd>
            <dt>cost</dt>
            <dd>{formatCost(usage.cost)}</dd>
            <dt>calls</dt>
            <dd>{usage.calls}</dd>
          </>
        )}
        {node.model && (
          <>
            <dt>model</dt>
            <dd>{node.model}</dd>
          </>
        )}
        {node.branch && (
          <>
            <dt>branch</dt>
            <dd>{node.branch}</dd>
          </>
        )}
      </dl>
      {node.error && (
        <div
          className={node.status === "failed" ? "dw-error" : "dw-note"}
          data-testid="debug-node-error"
        >
          {node.status === "failed" ? (
            <>
              <div className="dw-error-title">Failed</div>
              <div className="dw-error-message">{node.error}</div>
            </>
          ) : (
            <>
              {node.status === "skipped" ? "Skipped: " : node.status === "cancelled" ? "Cancelled: " : ""}
              {node.error}
            </>
          )}
        </div>
      )}
      {node.status === "reused" && (
        <div className="dw-note">Output reused from the earlier run (the node did not run again).</div>
      )}
      <h4>Output</h4>
      {node.status === "running" ? (
        <div className="dw-json" data-testid="debug-output">
          {streamed ? (
            <pre className="dw-pre dw-streaming">
              {streamed}
              <span className="dw-caret" />
            </pre>
          ) : (
            <div className="dw-muted">running…</div>
          )}
        </div>
      ) : (
        <>
        {node.hasOutput && <ChartsOf value={node.output} testId="debug-output-charts" />}
        {outputTable && <TableView table={outputTable} testId="debug-output-table" />}
        <JsonViewer
          value={node.hasOutput ? node.output : undefined}
          testId="debug-output"
          empty={
            node.status === "pending"
              ? "Not run."
              : node.status === "skipped"
                ? "Skipped: no output."
                : "No output."
          }
        />
        </>
      )}
      <h4>Inputs</h4>
      <JsonViewer
        value={node.inputs ?? undefined}
        empty={node.status === "reused" ? "Not recorded for a reused node." : "–"}
      />
      <TableMessages messages={node.messages} />
      {messages.length > 0 && (
        <>
          <h4>Messages</h4>
          <ul className="dw-messages">
            {messages.map((m, i) => (
              <li key={i}>
                <span className="dw-muted">+{formatSeconds(m.t)}</span> <code>{m.kind}</code>{" "}
                {JSON.stringify(m.data)}
              </li>
            ))}
          </ul>
        </>
      )}
    </div>
  );
}

// -- timeline ---------------------------------------------------------------------------------

export function Timeline({
  run,
  liveNow,
  labels,
  selected,
  onSelect,
}: {
  run: RunState;
  liveNow: number;
  labels: Record<string, string>;
  selected: string | null;
  onSelect: (id: string) => void;
}) {
  // Nodes inside sub-flows are shown by their sub-flow node's iterations, not as bars.
  const own = { ...run, order: topLevel(run.order), now: Math.max(run.now, liveNow) };
  const layout = ganttLayout(own);
  return (
    <div className="dw-gantt" data-testid="debug-timeline">
      {layout.bars.length === 0 ? (
        <div className="dw-muted">No node has run yet.</div>
      ) : (
        <>
          <div className="dw-gantt-row dw-gantt-axis">
            <span className="dw-gantt-label">
              {layout.maxParallel > 1 ? `up to ${layout.maxParallel} in parallel` : ""}
            </span>
            <span className="dw-gantt-track">
              {layout.ticks.map((tick) => (
                <span key={tick.ms} className="dw-gantt-tick" style={{ left: `${tick.pct}%` }}>
                  {tick.label}
                </span>
              ))}
            </span>
          </div>
          {layout.bars.map((bar) => {
            const parallel = layout.bars.some((other) => other !== bar && overlaps(bar, other));
            const title = `${bar.node} (${bar.status}): +${formatSeconds(bar.start / 1000)} → +${formatSeconds(bar.end / 1000)}, ${formatSeconds((bar.end - bar.start) / 1000)}${parallel ? ", in parallel with others" : ""}`;
            return (
              <div
                key={bar.node}
                className={`dw-gantt-row${selected === bar.node ? " dw-selected" : ""}`}
                onClick={() => onSelect(bar.node)}
                title={title}
                data-testid={`gantt-${bar.node}`}
              >
                <span className="dw-gantt-label">{labels[bar.node] ?? bar.node}</span>
                <span className="dw-gantt-track">
                  {layout.ticks.map((tick) => (
                    <span key={tick.ms} className="dw-gantt-grid" style={{ left: `${tick.pct}%` }} />
                  ))}
                  <span
                    className={`dw-gantt-bar dw-s-${bar.status}${bar.instant ? " dw-gantt-instant" : ""}`}
                    style={{ left: `${bar.leftPct}%`, width: bar.instant ? undefined : `${bar.widthPct}%` }}
                  />
                </span>
              </div>
            );
          })}
        </>
      )}
    </div>
  );
}

// -- past runs --------------------------------------------------------------------------------

export function RunsList({
  appSlug,
  runs,
  total,
  offset,
  limit,
  loading,
  error,
  currentRunId,
  onOpen,
  onPage,
  onRefresh,
}: {
  appSlug: string | null;
  runs: RunRecord[];
  total: number;
  offset: number;
  limit: number;
  loading: boolean;
  error: PanelError | null;
  currentRunId: string | null;
  onOpen: (id: string) => void;
  onPage: (offset: number) => void;
  onRefresh: () => void;
}) {
  return (
    <div className="dw-runs" data-testid="debug-runs">
      {appSlug === null ? (
        <div className="dw-muted">Save the flow as an app to keep and browse its runs.</div>
      ) : (
        <>
          <div className="dw-runs-bar">
            <span className="dw-muted">
              {total === 0 ? "No runs yet" : `${offset + 1}–${Math.min(offset + limit, total)} of ${total}`}
            </span>
            <span className="dw-spacer" />
            <button type="button" disabled={offset === 0 || loading} onClick={() => onPage(Math.max(0, offset - limit))}>
              Newer
            </button>
            <button type="button" disabled={offset + limit >= total || loading} onClick={() => onPage(offset + limit)}>
              Older
            </button>
            <button type="button" disabled={loading} onClick={onRefresh}>
              {loading ? "Loading…" : "Refresh"}
            </button>
          </div>
          {error && <ErrorBox error={error} />}
          <ul className="dw-runs-list">
            {runs.map((run) => (
              <li
                key={run.id}
                className={`dw-run-row${run.id === currentRunId ? " dw-selected" : ""}`}
                data-testid={`debug-run-${run.id}`}
                data-status={run.status}
                onClick={() => onOpen(run.id)}
                title={run.error?.message ?? run.id}
              >
                <StatusDot status={run.status} />
                <span className="dw-run-status">{run.status}</span>
                <span className="dw-run-time">{formatTime(run.created_at)}</span>
                <span className="dw-run-mode">{run.mode}</span>
                <span className="dw-run-duration">{formatSeconds(run.duration)}</span>
                <span className="dw-run-tokens">{run.usage ? `${totalTokens(run.usage)} tok` : ""}</span>
              </li>
            ))}
          </ul>
        </>
      )}
    </div>
  );
}
