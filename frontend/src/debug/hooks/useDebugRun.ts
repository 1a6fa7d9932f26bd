// One run at a time: started from the canvas's flow (or re-run from a node), or a past run
// opened; followed live over its event stream, which survives a lost connection
// (connection.ts). Events are folded into a ref and committed at most once per animation
// frame, so a fast token stream costs one render per frame.

import { useCallback, useEffect, useRef, useState } from "react";
import { cancelRun, type ConnectionStatus, followRun, followRunEvents, getRun, startDebugRun } from "../connection";
import { describeError, type PanelError } from "../format";
import { applyMessage, fromRecord, idleState, startingState, type RunState } from "../runState";
import type { DebugRunBody, FlowDocument } from "../types";

const raf: (cb: () => void) => number =
  typeof requestAnimationFrame === "function" ? (cb) => requestAnimationFrame(cb) : (cb) => setTimeout(cb, 16) as unknown as number;
const cancelRaf: (id: number) => void =
  typeof cancelAnimationFrame === "function" ? (id) => cancelAnimationFrame(id) : (id) => clearTimeout(id);

export interface Outcome {
  state: RunState | null; // null: superseded by another run, or nothing ran
  error: PanelError | null;
}

type FlowNodeRef = { id: string; block: string };

export interface DebugRun {
  run: RunState;
  /** A stream is being followed. */
  streaming: boolean;
  /** Following it live (started, not ended): the clock ticks. */
  live: boolean;
  /** Seconds since the run started, by this browser's clock (between events). */
  clock: number;
  conn: { status: ConnectionStatus; attempt: number };
  error: PanelError | null;
  setError: (error: PanelError | null) => void;
  cancelling: boolean;
  /** Run the flow with these inputs (or re-run it from a node of a recorded run). */
  runFlow: (inputs: Record<string, unknown>, reuse?: { run_id: string; from_node: string }) => Promise<Outcome>;
  /** Show a past run (followed live if it is still running). */
  openRun: (id: string) => Promise<void>;
  cancel: () => Promise<void>;
}

export function useDebugRun(args: {
  flow: FlowDocument;
  appSlug: string | null;
  flowNodes: FlowNodeRef[];
  /** A followed run ended (the list of past runs changed). */
  onSettled: () => void;
}): DebugRun {
  const { flow, appSlug, flowNodes, onSettled } = args;
  const [run, setRun] = useState<RunState>(idleState);
  const runRef = useRef<RunState>(run); // ahead of `run` by at most one animation frame
  const frameRef = useRef<number | null>(null);
  const abortRef = useRef<AbortController | null>(null);
  // A past run's record on its way (openRun): a newer openRun or run aborts it, so a late
  // record never replaces the run shown since.
  const openingRef = useRef<AbortController | null>(null);
  const [streaming, setStreaming] = useState(false);
  const [conn, setConn] = useState<{ status: ConnectionStatus; attempt: number }>({ status: "closed", attempt: 0 });
  const [error, setError] = useState<PanelError | null>(null);
  const [cancelling, setCancelling] = useState(false);
  const localStart = useRef<number | null>(null);
  const [clock, setClock] = useState(0);

  const schedule = useCallback((next: RunState) => {
    runRef.current = next;
    if (frameRef.current !== null) return;
    frameRef.current = raf(() => {
      frameRef.current = null;
      setRun(runRef.current);
    });
  }, []);
  const commitNow = useCallback((next: RunState) => {
    runRef.current = next;
    if (frameRef.current !== null) {
      cancelRaf(frameRef.current);
      frameRef.current = null;
    }
    setRun(next);
  }, []);

  useEffect(
    () => () => {
      abortRef.current?.abort();
      openingRef.current?.abort();
      if (frameRef.current !== null) cancelRaf(frameRef.current);
    },
    [],
  );

  const live = streaming && (run.phase === "starting" || run.phase === "running");
  useEffect(() => {
    if (!live) return;
    const timer = setInterval(() => {
      if (localStart.current !== null) setClock((performance.now() - localStart.current) / 1000);
    }, 200);
    return () => clearInterval(timer);
  }, [live]);

  const follow = useCallback(
    async (open: (signal: AbortSignal) => Promise<Response>, initial: RunState): Promise<Outcome> => {
      openingRef.current?.abort();
      openingRef.current = null;
      abortRef.current?.abort();
      const controller = new AbortController();
      abortRef.current = controller;
      const current = () => abortRef.current === controller;
      setError(null);
      setStreaming(true);
      setClock(0);
      localStart.current = null;
      commitNow(initial);
      let failure: PanelError | null = null;
      try {
        await followRun({
          open,
          signal: controller.signal,
          runId: () => runRef.current.runId,
          lastEventId: () => runRef.current.lastEventId,
          onStatus: (status, attempt) => {
            if (current()) setConn({ status, attempt });
          },
          onMessage: (message) => {
            if (!current()) return;
            const next = applyMessage(runRef.current, message);
            if (localStart.current === null && next.runId !== null && next.source === "live")
              localStart.current = performance.now() - next.now * 1000;
            schedule(next);
          },
        });
      } catch (e) {
        if (current()) {
          failure = describeError(e);
          setError(failure);
          if (runRef.current.phase === "starting") runRef.current = idleState(); // nothing ran
        }
      }
      if (!current()) return { state: null, error: null };
      abortRef.current = null;
      setStreaming(false);
      setConn({ status: "closed", attempt: 0 });
      commitNow(runRef.current);
      onSettled();
      return { state: runRef.current.phase === "idle" ? null : runRef.current, error: failure };
    },
    [commitNow, schedule, onSettled],
  );

  const runFlow = useCallback(
    (inputs: Record<string, unknown>, reuse?: { run_id: string; from_node: string }) => {
      const body: DebugRunBody = { flow, inputs, app: appSlug, stream: true };
      if (reuse) body.reuse = reuse;
      return follow(
        (signal) => startDebugRun(body, signal),
        startingState(flowNodes, reuse ? { runId: reuse.run_id, fromNode: reuse.from_node } : null),
      );
    },
    [flow, appSlug, flowNodes, follow],
  );

  const openRun = useCallback(
    async (id: string) => {
      abortRef.current?.abort(); // stop following a live run (it goes on on the server)
      abortRef.current = null;
      openingRef.current?.abort();
      const opening = new AbortController();
      openingRef.current = opening;
      setStreaming(false);
      setConn({ status: "closed", attempt: 0 });
      setError(null);
      try {
        const record = await getRun(id, opening.signal);
        if (opening.signal.aborted) return; // another run was opened or started meanwhile
        openingRef.current = null;
        if (record.status === "running") {
          // Still going: follow it from its first event.
          await follow((signal) => followRunEvents(id, signal), startingState(flowNodes));
        } else {
          commitNow(fromRecord(record, flowNodes));
        }
      } catch (e) {
        if (!opening.signal.aborted) setError(describeError(e));
      }
    },
    [flowNodes, follow, commitNow],
  );

  const cancel = useCallback(async () => {
    const id = runRef.current.runId;
    if (!id) {
      // Not started as far as we know: stop waiting for it.
      abortRef.current?.abort();
      abortRef.current = null;
      setStreaming(false);
      commitNow(idleState());
      return;
    }
    const following = abortRef.current !== null; // then the stream brings the cancellation
    setCancelling(true);
    try {
      await cancelRun(id);
      if (!following) await openRun(id); // not following it: show what was recorded
    } catch (e) {
      setError(describeError(e));
    } finally {
      setCancelling(false);
    }
  }, [commitNow, openRun]);

  return { run, streaming, live, clock, conn, error, setError, cancelling, runFlow, openRun, cancel };
}
