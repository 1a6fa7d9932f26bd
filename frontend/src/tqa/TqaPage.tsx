// "Ask your tables (AutoTQA)": the ask form, the conversations asked before, and the
// conversation itself — streamed live turn by turn, or replayed from the server.

import { useCallback, useEffect, useReducer, useRef, useState } from "react";
import "../debug/debug.css"; // the JSON viewer's styles
import { formatTime } from "../debug/format";
import { navigate, setLeaveGuard } from "../router";
import { describeError } from "../ui/toast";
import { askStream, tqaApi } from "./api";
import { conversationReducer, initialConversation, statusText } from "./conversation";
import { ApprovalWait } from "./ApprovalWait";
import { ConversationView, ScriptedLabel } from "./ConversationView";
import { DatasetsPanel } from "./DatasetsPanel";
import { SchemaBrowser } from "./SchemaBrowser";
import { ScriptedNotice } from "./ScriptedNotice";
import type { AskBody, ConversationSummary, SchedulerKind, TqaDataset } from "./types";
import "./tqa.css";

const PAGE = 20;
const POLL_MS = 1000; // a replayed conversation that is still running is read again (backing off to 5 s)

export function TqaPage({ conversationId }: { conversationId: string | null }) {
  const [state, dispatch] = useReducer(conversationReducer, initialConversation);
  const [loadError, setLoadError] = useState<{ code: string; message: string } | null>(null);
  const [loading, setLoading] = useState(false);
  const [asking, setAsking] = useState(false);
  const [reload, setReload] = useState(0);
  const [listVersion, setListVersion] = useState(0);
  const [editing, setEditing] = useState(false); // the datasets editor instead of the conversation
  const [datasetsVersion, setDatasetsVersion] = useState(0);
  const abortRef = useRef<AbortController | null>(null);
  const liveIdRef = useRef<string | null>(null);

  // Stop a running stream when the page goes.
  useEffect(
    () => () => {
      abortRef.current?.abort();
      setLeaveGuard(null);
    },
    [],
  );

  // The route names a conversation: replay it (unless it is the one streaming here).
  useEffect(() => {
    // eslint-disable-next-line react-hooks/set-state-in-effect -- another conversation: the last one's error goes
    setLoadError(null);
    if (!conversationId) {
      if (!abortRef.current) dispatch({ type: "reset" });
      return;
    }
    if (conversationId === liveIdRef.current && abortRef.current) return;
    abortRef.current?.abort();
    abortRef.current = null;
    liveIdRef.current = null;
    let cancelled = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let polls = 0;
    const load = (first: boolean) => {
      if (first) setLoading(true);
      tqaApi.conversation(conversationId).then(
        (conversation) => {
          if (cancelled) return;
          setLoading(false);
          dispatch({ type: "loaded", conversation });
          // A waiting conversation is read again too: someone may approve it elsewhere.
          if (conversation.status === "running" || conversation.status === "waiting") timer = setTimeout(() => load(false), Math.min(5000, POLL_MS * 1.25 ** polls++));
        },
        (e: unknown) => {
          if (cancelled) return;
          setLoading(false);
          setLoadError(describeError(e));
        },
      );
    };
    load(true);
    return () => {
      cancelled = true;
      clearTimeout(timer);
    };
  }, [conversationId, reload]);

  const ask = useCallback(async (body: AskBody) => {
    abortRef.current?.abort();
    const controller = new AbortController();
    abortRef.current = controller;
    liveIdRef.current = null;
    setLoadError(null);
    setAsking(true);
    setLeaveGuard(() => "A conversation is running here: leaving stops it.");
    dispatch({ type: "asking", request: body });
    try {
      for await (const message of askStream(body, controller.signal)) {
        if (controller.signal.aborted) return;
        dispatch({ type: "event", message });
        if (message.event === "conversation") {
          try {
            const id = (JSON.parse(message.data) as { id?: string }).id;
            if (id) {
              liveIdRef.current = id;
              navigate(`#/tqa/${encodeURIComponent(id)}`, { replace: true }); // a reload replays it
            }
          } catch {
            // the reducer ignores it too
          }
        }
      }
      dispatch({ type: "ended" });
    } catch (e) {
      if (controller.signal.aborted) return;
      dispatch({ type: "failed", error: describeError(e) });
    } finally {
      if (abortRef.current === controller) {
        abortRef.current = null;
        setAsking(false);
        setLeaveGuard(null);
        setListVersion((v) => v + 1);
      }
    }
  }, []);

  const stop = () => {
    abortRef.current?.abort();
    abortRef.current = null;
    setAsking(false);
    setLeaveGuard(null);
    dispatch({ type: "failed", error: { code: "stopped", message: "you stopped the stream (the server stops the conversation when its stream is closed)" } });
    setListVersion((v) => v + 1);
  };

  const open = (id: string) => {
    if (id === conversationId && !abortRef.current) setReload((r) => r + 1);
    else navigate(`#/tqa/${encodeURIComponent(id)}`);
  };

  const hasView = state.source !== null;
  return (
    <div className="tqa-page" data-testid="tqa-page">
      <header className="page-head">
        <a className="btn" href="#/" data-testid="tqa-back">
          ← Apps
        </a>
        <h1>
          Ask your tables <span className="muted">(AutoTQA)</span>
        </h1>
        <span className="spacer" />
        <button
          className={`btn${editing ? " btn-primary" : ""}`}
          data-testid="tqa-datasets-toggle"
          onClick={() => {
            if (editing) setDatasetsVersion((v) => v + 1); // the form sees the edits
            setEditing((on) => !on);
          }}
        >
          {editing ? "Back to the conversation" : "Datasets"}
        </button>
      </header>
      <div className="tqa-layout">
        <aside className="tqa-side">
          <AskForm onAsk={ask} asking={asking} onStop={stop} datasetsVersion={datasetsVersion} />
          <SchemaBrowser />
          <ConversationList version={listVersion} current={state.id ?? conversationId} onOpen={open} />
        </aside>
        <main className="tqa-main">
          {editing && <DatasetsPanel />}
          {!editing && loadError && (
            <div className="error-box" role="alert" data-testid="tqa-error">
              <strong>Could not load the conversation</strong> <code>{loadError.code}</code> {loadError.message}
              <button className="btn btn-small" onClick={() => setReload((r) => r + 1)}>
                Try again
              </button>
            </div>
          )}
          {state.streamError && state.status === "refused" && (
            <div className="error-box" role="alert" data-testid="tqa-error">
              <strong>The question was not asked</strong> <code>{state.streamError.code}</code> {state.streamError.message}
            </div>
          )}
          {state.status === "interrupted" && state.id && (
            <div className="tqa-note small" data-testid="tqa-interrupted">
              The live stream stopped before the end.{" "}
              <button className="btn btn-small" data-testid="tqa-reload" onClick={() => open(state.id!)}>
                Load what the server recorded
              </button>
            </div>
          )}
          {!editing && loading && !hasView && <p className="muted">Loading the conversation…</p>}
          {editing ? null : hasView && state.status !== "refused" ? (
            <>
              <ConversationView state={state} />
              {state.status === "waiting" && state.id && (
                <ApprovalWait key={state.turns.length} conversationId={state.id} onAnswered={() => setReload((r) => r + 1)} />
              )}
            </>
          ) : (
            !loading &&
            !loadError &&
            state.status !== "refused" && (
              <div className="empty" data-testid="tqa-empty">
                <p>Ask a question about the tables of the data sources (e.g. “What is the year-end bonus for Tom?”).</p>
                <p className="muted small">
                  Five agents — User, Planner, Engineer, Executor, Critic — take turns as the scheduler decides, until the Critic judges
                  the question answered or the round limit is reached. Each turn appears here as it happens.
                </p>
              </div>
            )
          )}
        </main>
      </div>
    </div>
  );
}

export function AskForm({
  onAsk,
  asking,
  onStop,
  datasetsVersion = 0,
}: {
  onAsk: (body: AskBody) => void;
  asking: boolean;
  onStop: () => void;
  datasetsVersion?: number;
}) {
  const [question, setQuestion] = useState("");
  const [dataset, setDataset] = useState("");
  const [datasets, setDatasets] = useState<TqaDataset[] | null>(null);
  const [datasetsError, setDatasetsError] = useState<{ code: string; message: string } | null>(null);
  const [scheduler, setScheduler] = useState<SchedulerKind>("fsm");
  const [maxRounds, setMaxRounds] = useState("50"); // the paper's max_round
  const [format, setFormat] = useState("");
  const rounds = Number(maxRounds);
  const roundsOk = Number.isInteger(rounds) && rounds >= 1 && rounds <= 100;
  const ready = question.trim() !== "" && roundsOk && !asking;
  const chosen = datasets?.find((d) => d.name === dataset) ?? null;

  useEffect(() => {
    let cancelled = false;
    tqaApi.datasets().then(
      (list) => {
        if (cancelled) return;
        setDatasets(list);
        setDatasetsError(null);
      },
      (e: unknown) => !cancelled && setDatasetsError(describeError(e)),
    );
    return () => {
      cancelled = true;
    };
  }, [datasetsVersion]);

  const submit = () => {
    if (!ready) return;
    onAsk({ question: question.trim(), dataset: dataset || undefined, scheduler, max_rounds: rounds, answer_format: format });
  };
  return (
    <form
      className="tqa-form"
      data-testid="tqa-form"
      onSubmit={(e) => {
        e.preventDefault();
        submit();
      }}
    >
      <ScriptedNotice onPick={setQuestion} />
      <div className="field">
        <label className="field-title" htmlFor="tqa-question">
          Question
        </label>
        <textarea
          id="tqa-question"
          className="input"
          rows={3}
          data-testid="tqa-question"
          placeholder="What is the year-end bonus for Tom?"
          value={question}
          onChange={(e) => setQuestion(e.target.value)}
          onKeyDown={(e) => {
            if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
              e.preventDefault();
              submit();
            }
          }}
        />
      </div>
      <div className="field">
        <label className="field-title" htmlFor="tqa-dataset">
          Dataset <span className="muted">(its sources, SOP, examples and hints)</span>
        </label>
        <select id="tqa-dataset" className="input" data-testid="tqa-dataset" value={dataset} onChange={(e) => setDataset(e.target.value)}>
          <option value="">none — every source, no SOP</option>
          {datasets?.map((d) => (
            <option key={d.name} value={d.name}>
              {d.name}
            </option>
          ))}
        </select>
        {datasetsError && (
          <div className="small error-text" data-testid="tqa-datasets-error">
            <code>{datasetsError.code}</code> {datasetsError.message}
          </div>
        )}
        {chosen && (
          <div className="small muted" data-testid="tqa-dataset-summary">
            {chosen.description && <div>{chosen.description}</div>}
            <div>sources: {chosen.sources.length ? chosen.sources.join(", ") : "all"}</div>
            <div>SOP {chosen.sop_version ? `v${chosen.sop_version}: ${chosen.sop.split("\n")[0].slice(0, 80)}` : "none"}</div>
            <div>
              examples:{" "}
              {Object.keys(chosen.namespaces).length ? `${Object.keys(chosen.namespaces).join(", ")} (k ${chosen.examples_k})` : "none"}
            </div>
          </div>
        )}
      </div>
      <div className="tqa-form-row">
        <div className="field">
          <label className="field-title" htmlFor="tqa-scheduler">
            Scheduler
          </label>
          <select id="tqa-scheduler" className="input" data-testid="tqa-scheduler" value={scheduler} onChange={(e) => setScheduler(e.target.value as SchedulerKind)}>
            <option value="fsm">fsm — fixed transitions</option>
            <option value="llm">llm — a model picks the next agent</option>
            <option value="rolling">rolling — round robin</option>
          </select>
        </div>
        <div className="field">
          <label className="field-title" htmlFor="tqa-max-rounds">
            Max rounds
          </label>
          <input
            id="tqa-max-rounds"
            className={`input${roundsOk ? "" : " input-invalid"}`}
            type="number"
            min={1}
            max={100}
            data-testid="tqa-max-rounds"
            value={maxRounds}
            onChange={(e) => setMaxRounds(e.target.value)}
          />
        </div>
      </div>
      <div className="field">
        <label className="field-title" htmlFor="tqa-format">
          Answer format <span className="muted">(optional Jinja2 template over the answer's fields)</span>
        </label>
        <input
          id="tqa-format"
          className="input mono"
          data-testid="tqa-format"
          placeholder="Year-end bonus of {{ name }}: {{ bonus }}"
          value={format}
          onChange={(e) => setFormat(e.target.value)}
        />
      </div>
      <div className="row end">
        {asking && (
          <button type="button" className="btn btn-danger" data-testid="tqa-stop" onClick={onStop}>
            Stop
          </button>
        )}
        <button type="submit" className="btn btn-primary" data-testid="tqa-ask" disabled={!ready}>
          {asking ? "Asking…" : "Ask"}
        </button>
      </div>
    </form>
  );
}

export function ConversationList({ version, current, onOpen }: { version: number; current: string | null; onOpen: (id: string) => void }) {
  const [items, setItems] = useState<ConversationSummary[] | null>(null);
  const [total, setTotal] = useState(0);
  const [error, setError] = useState<{ code: string; message: string } | null>(null);
  const [refresh, setRefresh] = useState(0);

  useEffect(() => {
    let cancelled = false;
    tqaApi.conversations(0, PAGE).then(
      (page) => {
        if (cancelled) return;
        setItems(page.items);
        setTotal(page.total);
        setError(null);
      },
      (e: unknown) => !cancelled && setError(describeError(e)),
    );
    return () => {
      cancelled = true;
    };
  }, [version, refresh]);

  const more = async () => {
    try {
      const page = await tqaApi.conversations(items?.length ?? 0, PAGE);
      setItems((old) => [...(old ?? []), ...page.items.filter((c) => !old?.some((o) => o.id === c.id))]);
      setTotal(page.total);
    } catch (e) {
      setError(describeError(e));
    }
  };

  return (
    <section className="tqa-list-panel" data-testid="tqa-conversations">
      <header className="row">
        <h3>Past conversations</h3>
        <span className="spacer" />
        <button className="btn btn-small" data-testid="tqa-conversations-refresh" onClick={() => setRefresh((r) => r + 1)}>
          Refresh
        </button>
      </header>
      {error && (
        <div className="error-box" role="alert" data-testid="tqa-conversations-error">
          <code>{error.code}</code> {error.message}
        </div>
      )}
      {items === null ? (
        !error && <p className="muted small">Loading…</p>
      ) : items.length === 0 ? (
        <p className="muted small">None yet.</p>
      ) : (
        <ul className="tqa-conv-list">
          {items.map((c) => (
            <li key={c.id}>
              <a
                href={`#/tqa/${encodeURIComponent(c.id)}`}
                className={`tqa-conv${c.id === current ? " current" : ""}`}
                data-testid={`tqa-conv-${c.id}`}
                data-status={c.status}
                onClick={(e) => {
                  e.preventDefault();
                  onOpen(c.id);
                }}
              >
                <span className="tqa-conv-q">{c.question}</span>
                <span className="tqa-conv-meta small">
                  <span className={`tqa-pill tqa-pill-${c.status}`} title={statusText(c.status)}>
                    {c.status === "completed" && c.answer ? "answered" : c.status.replace("_", " ")}
                  </span>
                  {c.usage?.scripted && <ScriptedLabel />}
                  {c.dataset && <span className="tag">{c.dataset}</span>}
                  <span className="muted">
                    {c.scheduler} · {c.rounds} rounds · {(c.usage?.total_tokens ?? 0).toLocaleString()} tokens · {formatTime(c.created_at)}
                  </span>
                </span>
              </a>
            </li>
          ))}
        </ul>
      )}
      {items && items.length < total && (
        <button className="btn btn-small" data-testid="tqa-conversations-more" onClick={more}>
          More ({total - items.length})
        </button>
      )}
    </section>
  );
}
