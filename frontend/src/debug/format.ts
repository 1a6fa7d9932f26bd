// Small formatting and error helpers of the debug panel (pure).

import { ApiError } from "../api/transport";
import type { Usage } from "./types";

export { formatMs } from "./gantt";

export function formatSeconds(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined) return "–";
  const ms = seconds * 1000;
  if (ms < 1) return `${Number(ms.toFixed(3))} ms`;
  if (ms < 1000) return `${Number(ms.toFixed(ms < 10 ? 2 : ms < 100 ? 1 : 0))} ms`;
  if (seconds < 60) return `${Number(seconds.toFixed(2))} s`;
  const minutes = Math.floor(seconds / 60);
  return `${minutes} min ${Math.round(seconds - minutes * 60)} s`;
}

export function formatCost(cost: number | null | undefined): string {
  if (cost === null || cost === undefined) return "–";
  if (cost === 0) return "$0";
  if (cost < 0.01) return `$${Number(cost.toPrecision(3))}`;
  return `$${cost.toFixed(4)}`;
}

export function totalTokens(usage: Usage | null | undefined): number {
  return usage ? usage.prompt_tokens + usage.completion_tokens : 0;
}

export function formatTime(iso: string | null | undefined): string {
  if (!iso) return "–";
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso;
  const today = new Date();
  const sameDay = date.toDateString() === today.toDateString();
  return sameDay
    ? date.toLocaleTimeString()
    : `${date.toLocaleDateString()} ${date.toLocaleTimeString()}`;
}

export interface Problem {
  node: string | null;
  port: string | null;
  code: string;
  message: string;
  severity: string;
}

export interface PanelError {
  title: string;
  message: string;
  code?: string;
  problems?: Problem[];
}

/** Whatever went wrong, as something the panel can show. */
export function describeError(error: unknown): PanelError {
  if (error instanceof ApiError) {
    const problems = Array.isArray(error.detail.problems)
      ? (error.detail.problems as Problem[]).filter((p) => p && typeof p.message === "string")
      : undefined;
    const title =
      error.code === "flow_invalid"
        ? "The flow is not valid"
        : error.code === "invalid_input"
          ? "The inputs were refused"
          : error.code === "network"
            ? "Connection problem"
            : error.status === 404
              ? "Not found"
              : error.status === 401 || error.status === 403
                ? "Not allowed"
                : `The server refused (${error.code})`;
    // flow_invalid's message repeats every problem: the list shows them.
    const errors = problems?.filter((p) => p.severity !== "warning").length ?? 0;
    const message =
      error.code === "flow_invalid" && problems?.length
        ? `${errors} error${errors === 1 ? "" : "s"} to fix before it can run${errors < problems.length ? " (warnings listed too)" : ""}:`
        : error.message;
    return { title, message, code: error.code, problems };
  }
  if (error instanceof Error) return { title: "Something went wrong", message: error.message };
  return { title: "Something went wrong", message: String(error) };
}
