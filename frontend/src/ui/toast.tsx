// Toasts: short notices and readable errors ("code: message"), from anywhere.

import { useSyncExternalStore } from "react";
import { ApiError } from "../api/transport";

export type ToastKind = "info" | "success" | "error" | "warning";

export interface Toast {
  id: number;
  kind: ToastKind;
  title: string;
  message?: string;
  code?: string;
}

let toasts: Toast[] = [];
let nextId = 1;
const listeners = new Set<() => void>();

function emit() {
  for (const l of listeners) l();
}

export function toast(kind: ToastKind, title: string, message?: string, code?: string, ms = kind === "error" ? 9000 : 3500): number {
  const id = nextId++;
  toasts = [...toasts, { id, kind, title, message, code }].slice(-5);
  emit();
  if (ms > 0) setTimeout(() => dismissToast(id), ms);
  return id;
}

export function dismissToast(id: number) {
  const before = toasts.length;
  toasts = toasts.filter((t) => t.id !== id);
  if (toasts.length !== before) emit();
}

/** An error as a toast: an ApiError shows its code and the server's message. */
export function toastError(error: unknown, context?: string): void {
  const { code, message } = describeError(error);
  toast("error", context ?? "Something went wrong", message, code);
}

export function describeError(error: unknown): { code: string; message: string } {
  if (error instanceof ApiError) return { code: error.code, message: error.message };
  if (error instanceof Error) return { code: error.name || "error", message: error.message };
  return { code: "error", message: String(error) };
}

function subscribe(l: () => void) {
  listeners.add(l);
  return () => listeners.delete(l);
}

export function Toaster() {
  const list = useSyncExternalStore(subscribe, () => toasts);
  return (
    <div className="toasts" aria-live="polite">
      {list.map((t) => (
        <div key={t.id} className={`toast toast-${t.kind}`} role={t.kind === "error" ? "alert" : "status"} data-testid={`toast-${t.kind}`}>
          <div className="toast-body">
            <strong>{t.title}</strong>
            {t.code && <code className="toast-code">{t.code}</code>}
            {t.message && <div className="toast-message">{t.message}</div>}
          </div>
          <button className="icon-btn" aria-label="Dismiss" onClick={() => dismissToast(t.id)}>
            ×
          </button>
        </div>
      ))}
    </div>
  );
}
