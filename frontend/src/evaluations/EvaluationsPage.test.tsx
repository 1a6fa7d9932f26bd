import { cleanup, fireEvent, render, screen, waitFor } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { jsonResponse } from "../debug/testutil";
import { parseRoute, routeHash } from "../router";
import { startPayload } from "./api";
import { EvaluationsPage } from "./EvaluationsPage";
import type { EvaluationRecord, Report } from "./types";

// Shapes as the server answers them (tests/evaluation/test_api_evaluations.py asserts them).
const evaluation = (id: string, label: string, accuracy: number): EvaluationRecord => ({
  id,
  app_id: "a1",
  version_id: "v1",
  label,
  dataset_id: "d1",
  split: "dev",
  metric: "numeric",
  status: "completed",
  error: null,
  total: 3,
  aggregate: { primary: "accuracy", accuracy, correct: 2, examples: 3 },
  created_at: "2026-11-24T08:00:00Z",
  finished_at: "2026-11-24T08:00:01Z",
});

const report: Report = {
  evaluation: evaluation("e1", "counter@1", 2 / 3),
  metric: "numeric",
  primary: "accuracy",
  value: 2 / 3,
  aggregate: { accuracy: 2 / 3, correct: 2, examples: 3 },
  examples: 3,
  mean_example_score: 2 / 3,
  ci: { low: 0, high: 1, confidence: 0.95 },
  breakdowns: { outcome: [{ value: "answered", count: 3, mean: 2 / 3 }] },
  cost: { tokens: 0, cost: 0, tokens_per_example: 0, cost_per_example: 0 },
  latency: { mean: 0.05, p50: 0.05, p95: 0.07 },
  errors: 0,
  failures: [{ id: "c", question: "rows?", prediction: 2, gold: { answer: "7" }, score: 0, error: null, run_id: "r9", trace: "/api/v1/runs/r9" }],
  charts: { latency_histogram: [{ from: 0.04, to: 0.05, count: 2 }], score_histogram: [] },
};

function mockServer(routes: Record<string, (init?: RequestInit) => Response>) {
  const calls: { key: string; body?: unknown }[] = [];
  vi.stubGlobal("fetch", async (url: string, init?: RequestInit) => {
    const key = `${init?.method ?? "GET"} ${url.split("?")[0]}`;
    calls.push({ key, body: init?.body ? JSON.parse(String(init.body)) : undefined });
    const route = routes[key];
    return route ? route(init) : jsonResponse({ error: { code: "not_found", message: `no route ${key}` } }, 404);
  });
  return calls;
}

beforeEach(() => {
  localStorage.clear();
  history.replaceState(null, "", "#/evaluations");
});
afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});

describe("routes", () => {
  it("#/evaluations and #/evaluations/<id>", () => {
    expect(parseRoute("#/evaluations")).toEqual({ page: "evaluations", evaluation: null });
    expect(parseRoute("#/evaluations/e1")).toEqual({ page: "evaluations", evaluation: "e1" });
    expect(routeHash({ page: "evaluations", evaluation: "e1" })).toBe("#/evaluations/e1");
  });
});

describe("EvaluationsPage", () => {
  const base = {
    "GET /api/v1/datasets": () => jsonResponse([{ id: "d1", name: "rows", kind: "generic", metric: "numeric", source: "eval_rows", splits: { dev: 3 } }]),
    "GET /api/v1/evaluations": () =>
      jsonResponse({ items: [evaluation("e1", "counter@1", 2 / 3), evaluation("e2", "offbyone@1", 0)], total: 2, offset: 0, limit: 100 }),
    "GET /api/v1/evaluations/e1": () => jsonResponse({ ...evaluation("e1", "counter@1", 2 / 3), done: 3, running_here: false, progress: null }),
    "GET /api/v1/evaluations/e1/report": () => jsonResponse(report),
  };

  it("shows the report: score with its interval, breakdowns, failures linked to their runs", async () => {
    mockServer(base);
    render(<EvaluationsPage evaluationId="e1" />);
    const shown = await screen.findByTestId("report");
    expect(shown.textContent).toContain("accuracy 0.6667");
    expect(shown.textContent).toContain("95% CI 0.0000–1.0000");
    expect(shown.textContent).toContain("by outcome");
    expect(screen.getByText("trace").getAttribute("href")).toBe("/api/v1/runs/r9");
    expect(screen.getByTestId("evaluation-e2").textContent).toContain("offbyone@1");
  });

  it("compares two evaluations", async () => {
    mockServer({
      ...base,
      "GET /api/v1/evaluations/compare": () =>
        jsonResponse({
          a: evaluation("e2", "offbyone@1", 0),
          b: evaluation("e1", "counter@1", 2 / 3),
          metric: "numeric",
          examples: 3,
          mean_a: 0,
          mean_b: 2 / 3,
          difference: 2 / 3,
          ci: { low: 0.33, high: 1, confidence: 0.95 },
          test: { name: "mcnemar_exact", p_value: 0.5 },
          gained: ["a", "b"],
          lost: [],
        }),
    });
    render(<EvaluationsPage evaluationId="e1" />);
    fireEvent.click(await screen.findByTestId("compare-e2"));
    const shown = await screen.findByTestId("comparison");
    expect(shown.textContent).toContain("+0.6667");
    expect(shown.textContent).toContain("mcnemar_exact p = 0.500");
    expect(shown.textContent).toContain("better in counter@1 (2): a, b");
  });

  it("shows the progress the workers stored, and a Stop that reaches them (queue mode)", async () => {
    const progress = { total: 10, done: 4, errors: 1, tokens: 120, cost: 0.002, elapsed: null, rate: 0.5, eta: 12 };
    const calls = mockServer({
      ...base,
      "GET /api/v1/evaluations/e1": () =>
        jsonResponse({ ...evaluation("e1", "counter@1", 0), status: "running", done: 4, running_here: false, progress }),
      "POST /api/v1/evaluations/e1/cancel": () => jsonResponse({ id: "e1", cancelled: true }, 202),
    });
    render(<EvaluationsPage evaluationId="e1" />);
    const shown = await screen.findByTestId("progress");
    expect(shown.textContent).toContain("4/10 · 0.5 ex/s · ETA 12 s");
    expect(shown.textContent).toContain("1 errors");
    fireEvent.click(screen.getByText("Stop"));
    await waitFor(() => expect(calls.some((c) => c.key === "POST /api/v1/evaluations/e1/cancel")).toBe(true));
  });

  it("starts an evaluation with only the fields given", async () => {
    const calls = mockServer({ ...base, "POST /api/v1/evaluations": () => jsonResponse(evaluation("e3", "counter@2", 0), 202) });
    render(<EvaluationsPage evaluationId={null} />);
    await screen.findAllByText("rows");
    fireEvent.change(screen.getByLabelText("app"), { target: { value: " counter " } });
    fireEvent.click(screen.getByTestId("start-evaluation"));
    await waitFor(() => expect(calls.some((c) => c.key === "POST /api/v1/evaluations")).toBe(true));
    const posted = calls.find((c) => c.key === "POST /api/v1/evaluations")?.body;
    expect(posted).toEqual({ app: "counter", dataset: "rows", split: "dev", concurrency: 4 });
    expect(window.location.hash).toBe("#/evaluations/e3");
  });

  it("startPayload leaves empty options out", () => {
    expect(startPayload({ app: "x", version: " 3 ", dataset: "d", split: "", concurrency: 2, limit: 10 })).toEqual({
      app: "x",
      version: "3",
      dataset: "d",
      split: "dev",
      concurrency: 2,
      limit: 10,
    });
  });
});

describe("a failed evaluation", () => {
  it("says why, and that starting it again goes on", async () => {
    const failed = { ...evaluation("e3", "stuck@1", 0), status: "failed", aggregate: null, finished_at: null };
    const error = { code: "worker_lost", message: "the worker running a job of it stopped 5 times" };
    mockServer({
      "GET /api/v1/datasets": () => jsonResponse([]),
      "GET /api/v1/evaluations": () => jsonResponse({ items: [failed], total: 1, offset: 0, limit: 100 }),
      "GET /api/v1/evaluations/e3": () => jsonResponse({ ...failed, error, done: 0, running_here: false, progress: null }),
    });
    render(<EvaluationsPage evaluationId="e3" />);
    const shown = await screen.findByTestId("evaluation-failed");
    expect(shown.textContent).toContain("the worker running a job of it stopped 5 times");
    expect(shown.textContent).toContain("worker_lost");
    expect(screen.queryByTestId("evaluations-more")).toBeNull();
  });
});

describe("feedback", () => {
  it("sends a failed example's correction to its run", async () => {
    const calls = mockServer({
      "GET /api/v1/datasets": () => jsonResponse([]),
      "GET /api/v1/evaluations": () => jsonResponse({ items: [evaluation("e1", "counter@1", 2 / 3)], total: 101, offset: 0, limit: 100 }),
      "GET /api/v1/evaluations/e1": () => jsonResponse({ ...evaluation("e1", "counter@1", 2 / 3), done: 3, running_here: false, progress: null }),
      "GET /api/v1/evaluations/e1/report": () => jsonResponse(report),
      "POST /api/v1/runs/r9/feedback": () => jsonResponse({ id: "f1", example_namespace: "feedback-counter" }, 201),
    });
    render(<EvaluationsPage evaluationId="e1" />);
    // one page of the list, which says how many there are in all
    expect((await screen.findByTestId("evaluations-more")).textContent).toBe("The newest 1 of 101.");
    fireEvent.change(await screen.findByLabelText("correction for r9"), { target: { value: "7" } });
    fireEvent.click(screen.getByTestId("feedback-r9"));
    expect(await screen.findByText("kept in feedback-counter")).toBeTruthy();
    expect(calls.find((c) => c.key === "POST /api/v1/runs/r9/feedback")?.body).toEqual({ score: 0, correction: "7" });
  });
});
