// A node's error policy in the config panel (docs/flow-format.md, "Error policies"): retries
// with backoff, then fail the run, output a default, or send the error down an `error` port.
// Applies to any block; the executor carries it out.

import { useState } from "react";
import type { ErrorPolicy } from "../api/types";
import type { EditorNode } from "./graph";

type Fallback = NonNullable<ErrorPolicy["fallback"]>;

const FALLBACKS: { value: Fallback; label: string }[] = [
  { value: "fail", label: "fail the run" },
  { value: "default", label: "output a default value" },
  { value: "error_branch", label: "send it down the error port" },
];

/** The policy without the fields left at their defaults; undefined when nothing is set. */
export function tidyPolicy(policy: ErrorPolicy): ErrorPolicy | undefined {
  const out: ErrorPolicy = {};
  if (policy.retry) out.retry = policy.retry;
  if (policy.retry && policy.backoff !== undefined && policy.backoff !== 0.5) out.backoff = policy.backoff;
  if (policy.fallback && policy.fallback !== "fail") out.fallback = policy.fallback;
  if (policy.fallback === "default" && policy.default !== undefined) out.default = policy.default;
  return Object.keys(out).length ? out : undefined;
}

export function ErrorPolicyField({
  node,
  onErrorPolicy,
}: {
  node: EditorNode;
  onErrorPolicy: (id: string, policy: ErrorPolicy | undefined) => void;
}) {
  const policy = node.data.on_error ?? {};
  const fallback: Fallback = policy.fallback ?? "fail";
  const shownDefault = policy.default === undefined ? "" : JSON.stringify(policy.default);
  const [defaultText, setDefaultText] = useState(shownDefault);
  const [shownFor, setShownFor] = useState({ id: node.id, shownDefault });
  if (shownFor.id !== node.id || shownFor.shownDefault !== shownDefault) {
    setShownFor({ id: node.id, shownDefault });
    setDefaultText(shownDefault);
  }
  let defaultBad = false;
  try {
    if (defaultText.trim()) JSON.parse(defaultText);
  } catch {
    defaultBad = true;
  }
  const change = (next: ErrorPolicy) => onErrorPolicy(node.id, tidyPolicy({ ...policy, ...next }));
  return (
    <fieldset className="field error-policy" data-testid="node-on-error">
      <legend className="field-title">When it fails</legend>
      <label className="field-title" htmlFor="node-retry-input">
        Retries
      </label>
      <input
        id="node-retry-input"
        className="input"
        data-testid="node-retry"
        type="number"
        min={0}
        max={10}
        value={policy.retry ?? 0}
        onChange={(e) => {
          const n = Math.round(Number(e.target.value));
          if (Number.isFinite(n) && n >= 0 && n <= 10) change({ retry: n });
        }}
      />
      {(policy.retry ?? 0) > 0 && (
        <>
          <label className="field-title" htmlFor="node-backoff-input">
            First wait (seconds, doubling)
          </label>
          <input
            id="node-backoff-input"
            className="input"
            data-testid="node-backoff"
            type="number"
            min={0}
            max={60}
            step={0.1}
            value={policy.backoff ?? 0.5}
            onChange={(e) => {
              const n = Number(e.target.value);
              if (Number.isFinite(n) && n >= 0 && n <= 60) change({ backoff: n });
            }}
          />
        </>
      )}
      <label className="field-title" htmlFor="node-fallback-input">
        Then
      </label>
      <select
        id="node-fallback-input"
        className="input"
        data-testid="node-fallback"
        value={fallback}
        onChange={(e) => change({ fallback: e.target.value as Fallback })}
      >
        {FALLBACKS.map((f) => (
          <option key={f.value} value={f.value}>
            {f.label}
          </option>
        ))}
      </select>
      {fallback === "default" && (
        <>
          <label className="field-title" htmlFor="node-default-input">
            Default (JSON)
          </label>
          <input
            id="node-default-input"
            className={`input${defaultBad ? " input-invalid" : ""}`}
            data-testid="node-default"
            placeholder="null"
            value={defaultText}
            onChange={(e) => {
              setDefaultText(e.target.value);
              const v = e.target.value.trim();
              if (v === "") change({ default: undefined });
              else {
                try {
                  change({ default: JSON.parse(v) as unknown });
                } catch {
                  // shown as invalid; the policy keeps its last valid default
                }
              }
            }}
          />
          {defaultBad && <div className="field-message">not JSON (a text needs quotes)</div>}
        </>
      )}
    </fieldset>
  );
}
