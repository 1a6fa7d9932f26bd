// A collapsible JSON viewer: objects and arrays fold, long strings are folded to their start,
// and every value can be copied (the whole value from the toolbar, any branch on hover).

import { useState, type ReactNode } from "react";

const LONG_STRING = 240; // characters shown of a folded string
const OPEN_DEPTH = 2; // levels open at first
const PAGE = 100; // children shown at a time of a big array or object

export function toJsonText(value: unknown): string {
  if (value === undefined) return "";
  if (typeof value === "string") return value;
  try {
    return JSON.stringify(value, null, 2) ?? String(value);
  } catch {
    return String(value);
  }
}

export async function copyText(text: string): Promise<boolean> {
  try {
    if (navigator.clipboard?.writeText) {
      await navigator.clipboard.writeText(text);
      return true;
    }
  } catch {
    // fall through to the textarea way (insecure origins, old browsers)
  }
  try {
    const area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.style.position = "fixed";
    area.style.opacity = "0";
    document.body.appendChild(area);
    area.select();
    const ok = document.execCommand?.("copy") ?? false;
    area.remove();
    return ok;
  } catch {
    return false;
  }
}

export function CopyButton({ text, label = "Copy" }: { text: () => string; label?: string }) {
  const [state, setState] = useState<"idle" | "copied" | "failed">("idle");
  return (
    <button
      type="button"
      className="dw-copy"
      title="Copy to the clipboard"
      onClick={async (e) => {
        e.stopPropagation();
        const ok = await copyText(text());
        setState(ok ? "copied" : "failed");
        setTimeout(() => setState("idle"), 1200);
      }}
    >
      {state === "copied" ? "Copied" : state === "failed" ? "Copy failed" : label}
    </button>
  );
}

function isTruncated(value: unknown): value is { truncated: true; size: number; preview: string } {
  return (
    !!value &&
    typeof value === "object" &&
    (value as { truncated?: unknown }).truncated === true &&
    typeof (value as { preview?: unknown }).preview === "string"
  );
}

export function JsonViewer({
  value,
  testId,
  empty = "(nothing)",
}: {
  value: unknown;
  testId?: string;
  empty?: string;
}) {
  const whole = () => (typeof value === "string" ? value : toJsonText(value));
  return (
    <div className="dw-json" data-testid={testId}>
      <div className="dw-json-bar">
        <span className="dw-json-kind">{kindOf(value)}</span>
        {value !== undefined && (
          <CopyButton text={whole} label={typeof value === "string" ? "Copy text" : "Copy JSON"} />
        )}
      </div>
      {value === undefined ? (
        <div className="dw-muted">{empty}</div>
      ) : isTruncated(value) ? (
        <div>
          <div className="dw-note">
            Stored value truncated: {value.size.toLocaleString()} bytes of JSON; its start:
          </div>
          <pre className="dw-pre">{value.preview}</pre>
        </div>
      ) : (
        <div className="dw-json-body">
          <JsonNode value={value} depth={0} />
        </div>
      )}
    </div>
  );
}

function kindOf(value: unknown): string {
  if (value === undefined) return "";
  if (value === null) return "null";
  if (Array.isArray(value)) return `array [${value.length}]`;
  if (typeof value === "object") return `object {${Object.keys(value as object).length}}`;
  if (typeof value === "string") return `string (${value.length} chars)`;
  return typeof value;
}

function JsonNode({ value, depth, label }: { value: unknown; depth: number; label?: ReactNode }) {
  const [open, setOpen] = useState(depth < OPEN_DEPTH);
  const [shown, setShown] = useState(PAGE);
  const key = label !== undefined ? <span className="dw-json-key">{label}: </span> : null;
  if (value === null || typeof value !== "object") {
    return (
      <div className="dw-json-row">
        {key}
        <Primitive value={value} />
      </div>
    );
  }
  const entries: [string, unknown][] = Array.isArray(value)
    ? value.map((v, i) => [String(i), v])
    : Object.entries(value as Record<string, unknown>);
  const [openMark, closeMark] = Array.isArray(value) ? ["[", "]"] : ["{", "}"];
  if (entries.length === 0) {
    return (
      <div className="dw-json-row">
        {key}
        <span className="dw-json-punct">
          {openMark}
          {closeMark}
        </span>
      </div>
    );
  }
  return (
    <div className="dw-json-branch">
      <div className="dw-json-row dw-json-toggle" onClick={() => setOpen(!open)}>
        <span className="dw-json-caret">{open ? "▾" : "▸"}</span>
        {key}
        <span className="dw-json-punct">{openMark}</span>
        {!open && (
          <span className="dw-muted">
            {" "}
            {entries.length} {Array.isArray(value) ? "items" : "keys"} {closeMark}
          </span>
        )}
        <span className="dw-json-hover">
          <CopyButton text={() => toJsonText(value)} />
        </span>
      </div>
      {open && (
        <div className="dw-json-children">
          {entries.slice(0, shown).map(([k, v]) => (
            <JsonNode key={k} value={v} depth={depth + 1} label={Array.isArray(value) ? k : JSON.stringify(k)} />
          ))}
          {entries.length > shown && (
            <button type="button" className="dw-link" onClick={() => setShown(shown + PAGE * 10)}>
              show {Math.min(PAGE * 10, entries.length - shown)} more of {entries.length - shown}
            </button>
          )}
          <div className="dw-json-punct">{closeMark}</div>
        </div>
      )}
    </div>
  );
}

function Primitive({ value }: { value: unknown }) {
  const [unfolded, setUnfolded] = useState(false);
  if (typeof value === "string") {
    const long = value.length > LONG_STRING || value.split("\n").length > 8;
    const shown = long && !unfolded ? value.slice(0, LONG_STRING).split("\n").slice(0, 8).join("\n") : value;
    return (
      <span className="dw-json-string">
        {/* JSON's own quotes and escapes, so a selection pastes as JSON (a folded string ends in …). */}
        {long && !unfolded ? `${JSON.stringify(shown).slice(0, -1)}…"` : JSON.stringify(shown)}
        {long && (
          <button type="button" className="dw-link" onClick={() => setUnfolded(!unfolded)}>
            {unfolded ? "fold" : `show all ${value.length.toLocaleString()} chars`}
          </button>
        )}
        {long && (
          <span className="dw-json-hover">
            <CopyButton text={() => value} />
          </span>
        )}
      </span>
    );
  }
  if (typeof value === "number") return <span className="dw-json-number">{String(value)}</span>;
  if (typeof value === "boolean") return <span className="dw-json-bool">{String(value)}</span>;
  if (value === null) return <span className="dw-json-null">null</span>;
  return <span>{String(value)}</span>;
}
