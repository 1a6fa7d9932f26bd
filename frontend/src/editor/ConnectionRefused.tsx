// The reason a connection is refused, shown by the pointer while the user drags a wire (and
// for a moment after), from a tiny store so that the canvas itself never re-renders for it.

import { useSyncExternalStore } from "react";

interface Refusal {
  reason: string;
  x: number;
  y: number;
  at: number;
}

let current: Refusal | null = null;
let timer: ReturnType<typeof setTimeout> | null = null;
const listeners = new Set<() => void>();

function emit() {
  for (const l of listeners) l();
}

export function showRefusal(reason: string, x: number, y: number) {
  if (!current || current.reason !== reason || Math.abs(current.x - x) > 30 || Math.abs(current.y - y) > 30) {
    current = { reason, x, y, at: Date.now() };
    emit();
  }
  if (timer) clearTimeout(timer);
  timer = setTimeout(() => {
    current = null;
    emit();
  }, 3500);
}

export function clearRefusal() {
  if (!current) return;
  current = null;
  if (timer) clearTimeout(timer);
  emit();
}

export function lastRefusal(): string | null {
  return current?.reason ?? null;
}

function subscribe(l: () => void) {
  listeners.add(l);
  return () => {
    listeners.delete(l);
  };
}

export function ConnectionRefused() {
  const refusal = useSyncExternalStore(subscribe, () => current);
  if (!refusal) return null;
  return (
    <div className="connection-refused" role="alert" data-testid="connection-refused" style={{ left: refusal.x + 14, top: refusal.y + 14 }}>
      ✕ {refusal.reason}
    </div>
  );
}
