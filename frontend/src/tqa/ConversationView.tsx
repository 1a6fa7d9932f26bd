// The conversation, drawn the same way live and in replay: a card per turn (agent, scheduler
// choice, text, tool call with SQL and rows, errors, hints), the ending, the answer with its
// evidence, the totals. Only renders: the state comes from conversation.ts.

import { useState } from "react";
import { formatCost, formatSeconds } from "../debug/format";
import { JsonViewer } from "../debug/JsonViewer";
import { ChartsOf } from "../charts/ChartView";
import { CopyButton } from "../ui/Modal";
import {
  agentColour,
  isAnswered,
  isScriptedConversation,
  isScriptedTurn,
  ROW_LIMIT,
  schedulerText,
  statusText,
  totalsOf,
  turnTokens,
  type ConversationState,
} from "./conversation";
import type { ConversationProfile, Evidence, Row, SchedulerChoice, TqaAnswer, ToolCall, TqaTurn } from "./types";

export function ScriptedLabel({ testId, title }: { testId?: string; title?: string }) {
  return (
    <span className="tqa-scripted" data-testid={testId} title={title ?? "dagwright's scripted model answered: scripted, not a model's answer"}>
      scripted
    </span>
  );
}

export function ConversationView({ state }: { state: ConversationState }) {
  const scripted = isScriptedConversation(state);
  const lastSeq = state.turns.length ? state.turns[state.turns.length - 1].seq : -1;
  return (
    <section className="tqa-conversation" data-testid="tqa-conversation" data-status={state.status} data-source={state.source ?? ""}>
      <header className="tqa-conv-head">
        <h2 className="tqa-question">{state.question || "…"}</h2>
        <div className="tqa-meta small muted">
          {state.source && <span className="tag" data-testid="tqa-source">{state.source === "live" ? "live" : "replay"}</span>}
          {state.request.scheduler && <span className="tag">scheduler {state.request.scheduler}</span>}
          {state.request.max_rounds !== undefined && <span className="tag">max {state.request.max_rounds} rounds</span>}
          {state.request.dataset && <span className="tag">dataset {state.request.dataset}</span>}
          {state.id && <span className="tag mono" title="conversation id">{state.id}</span>}
        </div>
        {state.request.sop && (
          <div className="small">
            <strong>SOP{state.request.profile?.sop_version ? ` v${state.request.profile.sop_version}` : ""}</strong>{" "}
            <span className="tqa-pre">{state.request.sop}</span>
          </div>
        )}
        {state.request.profile && <ProfileUsed profile={state.request.profile} />}
        {state.request.answer_format && (
          <div className="small">
            <strong>Answer format</strong> <code className="tqa-code-inline">{state.request.answer_format}</code>
          </div>
        )}
      </header>
      {scripted && (
        <div className="tqa-scripted-note" data-testid="tqa-scripted-note">
          <ScriptedLabel /> dagwright's scripted model played the agents here: their words are scripted, not a model's. This shows the
          orchestration (tools, retries, hints, schedulers), never how well a model answers.
        </div>
      )}
      <ol className="tqa-turns">
        {state.turns.map((turn) => (
          <li key={turn.seq}>
            <TurnCard turn={turn} />
          </li>
        ))}
        {state.status === "running" && (
          <li className="tqa-waiting muted" data-testid="tqa-waiting">
            {lastSeq < 0 ? "Starting the conversation…" : "Waiting for the next turn…"}
          </li>
        )}
      </ol>
      <Ending state={state} />
      <Totals state={state} />
    </section>
  );
}

function Ending({ state }: { state: ConversationState }) {
  if (state.status === "running") return null;
  const answered = isAnswered(state);
  const error = state.summary?.error ?? state.streamError;
  return (
    <>
      <div
        className={`tqa-status tqa-status-${answered ? "answered" : state.status === "completed" ? "noanswer" : state.status}`}
        data-testid="tqa-status"
        data-status={state.status}
        role={answered ? "status" : "alert"}
      >
        <strong>{statusText(state.status)}</strong>
        {state.status === "round_limit" && (
          <span>
            {" "}
            — the Critic never judged the question answered within {state.summary?.max_rounds ?? state.request.max_rounds ?? "the"} rounds. This is not an
            answer.
          </span>
        )}
        {error && (
          <div className="tqa-error-line">
            <code>{error.code}</code> {error.message}
          </div>
        )}
      </div>
      {answered && state.summary?.answer && <AnswerPanel answer={state.summary.answer} scripted={isScriptedConversation(state)} />}
    </>
  );
}

function Totals({ state }: { state: ConversationState }) {
  if (!state.turns.length && !state.summary) return null;
  const t = totalsOf(state);
  const timing = state.summary?.timing;
  return (
    <div className="tqa-totals small" data-testid="tqa-totals">
      <span>
        <strong>{t.rounds}</strong> rounds
      </span>
      <span data-testid="tqa-total-tokens">
        <strong>{t.tokens.toLocaleString()}</strong> tokens ({t.promptTokens.toLocaleString()} prompt + {t.completionTokens.toLocaleString()} completion)
      </span>
      <span data-testid="tqa-total-cost">cost {formatCost(t.cost)}</span>
      {timing && (
        <span>
          {formatSeconds(timing.total_s)} in all ({formatSeconds(timing.agents_s)} agents, {formatSeconds(timing.orchestrator_s)} orchestrator)
        </span>
      )}
      {state.status === "running" && <span className="muted">so far</span>}
      {isScriptedConversation(state) && <span className="muted">(the scripted model's estimates: a token per four characters)</span>}
    </div>
  );
}

export function TurnCard({ turn }: { turn: TqaTurn }) {
  const n = turn.seq;
  const colour = agentColour(turn.agent);
  const scripted = isScriptedTurn(turn);
  const tokens = turnTokens(turn);
  return (
    <article
      className={`tqa-turn${turn.error ? " tqa-turn-failed" : ""}`}
      data-testid={`tqa-turn-${n}`}
      data-agent={turn.agent}
      style={{ borderLeftColor: colour }}
    >
      <header className="tqa-turn-head">
        <span className="tqa-agent" style={{ background: colour }}>
          {turn.agent}
        </span>
        <span className="muted small">#{n}</span>
        {scripted && <ScriptedLabel testId={`tqa-turn-${n}-scripted`} />}
        <span className="spacer" />
        {turn.seq > 0 && (
          <span className="small muted" data-testid={`tqa-turn-${n}-usage`}>
            {tokens ? `${tokens.toLocaleString()} tokens` : "no tokens"}
            {typeof turn.usage?.cost === "number" ? ` · ${formatCost(turn.usage.cost)}` : ""} · {formatSeconds(turn.duration)} · at +{formatSeconds(turn.started)}
          </span>
        )}
      </header>
      {turn.scheduler && <SchedulerLine choice={turn.scheduler} n={n} />}
      <TurnBody turn={turn} />
      {turn.error && (
        <div className="error-box tqa-turn-error" data-testid={`tqa-turn-${n}-error`}>
          <code>{turn.error.code}</code> {turn.error.message}
        </div>
      )}
      {turn.tool_call && <ToolCallView call={turn.tool_call} n={n} />}
      {(turn.text || turn.content !== null) && turn.agent !== "User" && (
        <details className="tqa-raw">
          <summary className="small muted">as the agents read it</summary>
          <pre className="tqa-pre tqa-mono">{turn.text || "(no text)"}</pre>
          {turn.content !== null && turn.content !== undefined && <JsonViewer value={turn.content} />}
        </details>
      )}
    </article>
  );
}

function SchedulerLine({ choice, n }: { choice: SchedulerChoice; n: number }) {
  const tokens = choice.usage ? (choice.usage.total_tokens ?? (choice.usage.prompt_tokens ?? 0) + (choice.usage.completion_tokens ?? 0)) : 0;
  return (
    <div className={`tqa-scheduler small${choice.fallback ? " tqa-fallback" : ""}`} data-testid={`tqa-scheduler-${n}`}>
      <span aria-hidden>⇢ </span>
      {schedulerText(choice)}
      {choice.answer !== null && choice.answer !== undefined && (
        <span className="muted">
          {" "}
          (the scheduler said “{choice.answer}”{choice.usage?.scripted ? ", scripted" : ""})
        </span>
      )}
      {tokens > 0 && <span className="muted"> · choosing cost {tokens.toLocaleString()} tokens</span>}
    </div>
  );
}

interface EngineerDecision {
  action?: string;
  tool?: string;
  input?: unknown;
  thought?: string;
  report?: unknown;
}
interface CriticVerdict {
  complete?: boolean;
  answer?: unknown;
  gaps?: unknown[];
  summary?: string;
}

function TurnBody({ turn }: { turn: TqaTurn }) {
  const content = turn.content && typeof turn.content === "object" ? (turn.content as Record<string, unknown>) : null;
  if (turn.agent === "User") {
    const sop = content?.sop;
    return (
      <div className="tqa-text">
        {turn.text}
        {typeof sop === "string" && sop && <div className="small muted tqa-pre">SOP: {sop}</div>}
      </div>
    );
  }
  if (turn.agent === "Executor") return turn.tool_call ? null : <div className="tqa-text tqa-pre">{turn.text}</div>;
  if (turn.agent === "Engineer" && content && typeof content.action === "string") {
    const d = content as EngineerDecision;
    if (d.action === "tool") {
      return (
        <div className="tqa-text">
          Asks for the tool <code>{d.tool}</code>
          {d.thought && <span className="muted"> — {d.thought}</span>}
          {!!d.input && typeof d.input === "object" && Object.keys(d.input).length > 0 && <JsonViewer value={d.input} />}
        </div>
      );
    }
    return (
      <div className="tqa-text">
        Reports: <span className="tqa-pre">{typeof d.report === "string" ? d.report : JSON.stringify(d.report)}</span>
      </div>
    );
  }
  if (turn.agent === "Critic" && content && typeof content.complete === "boolean") {
    const v = content as CriticVerdict;
    return v.complete ? (
      <div className="tqa-text">
        Judges it answered{v.summary ? <span className="muted"> ({v.summary})</span> : null}:{" "}
        <strong>{typeof v.answer === "string" ? v.answer : JSON.stringify(v.answer)}</strong>
      </div>
    ) : (
      <div className="tqa-text">
        Not answered yet; gaps:
        <ul className="tqa-list">
          {(v.gaps ?? []).map((g, i) => (
            <li key={i}>{typeof g === "string" ? g : JSON.stringify(g)}</li>
          ))}
        </ul>
      </div>
    );
  }
  if (!turn.text) return turn.error ? null : <div className="tqa-text muted">(no text)</div>;
  return <div className="tqa-text tqa-pre">{turn.text}</div>;
}

export function ToolCallView({ call, n }: { call: ToolCall; n: number }) {
  const empty = !call.error && call.rows !== null && call.rows.length === 0;
  return (
    <div className="tqa-tool" data-testid={`tqa-tool-${n}`}>
      <div className="small">
        Tool <code>{call.tool}</code> <span className="muted">(app {call.app})</span>
        {call.run_id && (
          <span className="muted">
            {" "}
            · run <span className="mono">{call.run_id}</span>
          </span>
        )}
      </div>
      {call.input && Object.keys(call.input).length > 0 && (
        <details className="tqa-raw">
          <summary className="small muted">input</summary>
          <JsonViewer value={call.input} />
        </details>
      )}
      {call.sql && <SqlBlock sql={call.sql} testId={`tqa-sql-${n}`} />}
      {call.error && (
        <div className="error-box" data-testid={`tqa-tool-error-${n}`}>
          <code>{call.error.code}</code> {call.error.message}
        </div>
      )}
      {!call.error && call.rows !== null && (
        <RowsTable columns={call.columns} rows={call.rows} rowCount={call.row_count} truncated={call.truncated} testId={`tqa-rows-${n}`} />
      )}
      {empty && <div className="warning small">The result is empty: a filter value may be spelt differently.</div>}
      {call.outputs && <Outputs outputs={call.outputs} />}
      {call.hints && call.hints.length > 0 && (
        <div className="tqa-hints" data-testid={`tqa-hints-${n}`}>
          <div className="small">
            <strong>Hints given back to the Engineer</strong>
          </div>
          <ul className="tqa-list">
            {call.hints.map((h, i) => (
              <li key={i}>{h}</li>
            ))}
          </ul>
        </div>
      )}
    </div>
  );
}

function Outputs({ outputs }: { outputs: Record<string, unknown> }) {
  const { result, stdout, ...rest } = outputs;
  return (
    <div className="tqa-outputs small">
      {result !== undefined && (
        <div>
          Program result: <strong className="tqa-mono">{typeof result === "string" ? result : JSON.stringify(result)}</strong>
        </div>
      )}
      {typeof stdout === "string" && stdout && <pre className="tqa-pre tqa-mono">{stdout}</pre>}
      {Object.keys(rest).length > 0 && <JsonViewer value={rest} />}
    </div>
  );
}

export function SqlBlock({ sql, testId }: { sql: string; testId: string }) {
  return (
    <div className="tqa-sql">
      <pre className="tqa-mono" data-testid={testId}>
        {sql}
      </pre>
      <CopyButton text={sql} testId={`${testId}-copy`} label="Copy SQL" />
    </div>
  );
}

function cell(value: unknown): string {
  if (value === null || value === undefined) return "NULL";
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

/** A result table: the first 50 rows, and how many more there are (`row_count` counts them all). */
export function RowsTable({
  columns,
  rows,
  rowCount,
  truncated,
  testId,
}: {
  columns: string[] | null;
  rows: (Row | unknown[])[];
  rowCount?: number | null;
  truncated?: boolean;
  testId: string;
}) {
  const [all, setAll] = useState(false);
  const cols = columns && columns.length ? columns : rows[0] && !Array.isArray(rows[0]) ? Object.keys(rows[0] as Row) : [];
  const shown = all ? rows : rows.slice(0, ROW_LIMIT);
  const total = Math.max(rowCount ?? rows.length, rows.length);
  const more = total - shown.length;
  const valueAt = (row: Row | unknown[], c: string, i: number) => (Array.isArray(row) ? row[i] : (row as Row)[c]);
  return (
    <div className="tqa-rows-wrap">
      <table className="tqa-rows" data-testid={testId}>
        <thead>
          <tr>
            {cols.map((c) => (
              <th key={c}>{c}</th>
            ))}
          </tr>
        </thead>
        <tbody>
          {shown.map((row, r) => (
            <tr key={r}>
              {cols.map((c, i) => {
                const v = valueAt(row, c, i);
                return (
                  <td key={c} className={typeof v === "number" ? "num" : v === null || v === undefined ? "null" : undefined}>
                    {cell(v)}
                  </td>
                );
              })}
            </tr>
          ))}
        </tbody>
      </table>
      <div className="small muted" data-testid={`${testId}-count`}>
        {total === 0 ? "0 rows" : `${total.toLocaleString()} row${total === 1 ? "" : "s"}`}
        {more > 0 && (
          <>
            {" "}
            · <span data-testid={`${testId}-more`}>{more.toLocaleString()} more</span>
            {rows.length > shown.length && (
              <button type="button" className="btn btn-small tqa-link-btn" onClick={() => setAll(true)}>
                show all {rows.length.toLocaleString()} received
              </button>
            )}
            {total > rows.length && <span> ({(total - rows.length).toLocaleString()} not sent by the server)</span>}
          </>
        )}
        {truncated && !more && <span> · truncated by the tool</span>}
      </div>
    </div>
  );
}

export function AnswerPanel({ answer, scripted }: { answer: TqaAnswer; scripted: boolean }) {
  return (
    <section className="tqa-answer" data-testid="tqa-answer" data-form={answer.form}>
      <header className="row">
        <h3>Answer</h3>
        <span className="tag">{answer.form === "template" ? "filled format" : answer.form}</span>
        {scripted && <ScriptedLabel testId="tqa-answer-scripted" title="the scripted model's answer, not a model's" />}
        <span className="spacer" />
        <span
          className={`tqa-grounded ${answer.grounded ? "yes" : "no"}`}
          data-testid="tqa-grounded"
          data-grounded={String(answer.grounded)}
          title="whether the answer's value appears in the evidence the tools returned"
        >
          {answer.grounded ? "✓ grounded in the evidence" : "⚠ not found in the evidence — may be made up"}
        </span>
      </header>
      <AnswerBody answer={answer} />
      <ChartsOf value={answer} testId="tqa-answer-charts" />
      {answer.evidence.length > 0 ? (
        <div className="tqa-evidence" data-testid="tqa-evidence">
          <h4>Evidence</h4>
          {answer.evidence.map((ev, i) => (
            <EvidenceView key={i} evidence={ev} i={i} />
          ))}
        </div>
      ) : (
        <div className="small muted">No evidence: no tool call succeeded.</div>
      )}
    </section>
  );
}

function AnswerBody({ answer }: { answer: TqaAnswer }) {
  switch (answer.form) {
    case "value":
      return (
        <div>
          <div className="tqa-value" data-testid="tqa-answer-value">
            {cell(answer.value)}
          </div>
          {answer.text && <div className="tqa-text">{answer.text}</div>}
        </div>
      );
    case "table":
      return answer.table ? (
        <RowsTable columns={answer.table.columns} rows={answer.table.rows as (Row | unknown[])[]} testId="tqa-answer-table" />
      ) : (
        <div className="tqa-text">{answer.text}</div>
      );
    case "template":
      return (
        <div>
          <div className="tqa-value tqa-filled" data-testid="tqa-answer-filled">
            {answer.text}
          </div>
          {answer.fields && Object.keys(answer.fields).length > 0 && (
            <div className="small muted">
              fields:{" "}
              {Object.entries(answer.fields).map(([k, v]) => (
                <span className="chip" key={k}>
                  {k} = {cell(v)}
                </span>
              ))}
            </div>
          )}
        </div>
      );
    default:
      return (
        <div className="tqa-text tqa-answer-text" data-testid="tqa-answer-text">
          {answer.text ?? cell(answer.value)}
        </div>
      );
  }
}

function EvidenceView({ evidence, i }: { evidence: Evidence; i: number }) {
  return (
    <div className="tqa-evidence-item">
      <div className="small">
        from <code>{evidence.tool}</code>
      </div>
      {evidence.sql && <SqlBlock sql={evidence.sql} testId={`tqa-evidence-sql-${i}`} />}
      {evidence.rows && (
        <RowsTable columns={evidence.columns} rows={evidence.rows} rowCount={evidence.row_count} truncated={evidence.truncated} testId={`tqa-evidence-rows-${i}`} />
      )}
      {evidence.outputs && <Outputs outputs={evidence.outputs} />}
    </div>
  );
}

/** What the conversation took from its dataset: example namespaces, hints given, hints learned. */
function ProfileUsed({ profile }: { profile: ConversationProfile }) {
  const roles = Object.keys(profile.namespaces ?? {});
  return (
    <div className="small muted" data-testid="tqa-profile-used">
      {!profile.found && <span>no TQA dataset named “{profile.name}”: its hints only · </span>}
      {roles.length > 0 && (
        <span>
          examples for {roles.join(", ")} (k {profile.examples_k}) ·{" "}
        </span>
      )}
      <span data-testid="tqa-learned-used">{profile.learned_hints?.length ?? 0} learned hint(s) given</span>
      {profile.learned?.length > 0 && (
        <span data-testid="tqa-learned-new">
          {" "}
          · learned {profile.learned.length} new candidate hint(s) for review
        </span>
      )}
    </div>
  );
}
