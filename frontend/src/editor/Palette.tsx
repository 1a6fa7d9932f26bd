// The block palette: the registry grouped by category, searchable; drag a block onto the
// canvas (HTML5 drag and drop), or double-click / Enter to add it in the middle of the view.

import { memo, useMemo, useState } from "react";
import type { BlockSpec } from "../api/types";
import { blockIcon, blockKind, blockTitle } from "./blockTitle";

export const BLOCK_MIME = "application/x-dagwright-block";

export const CATEGORY_LABELS: Record<string, string> = {
  input: "Input / output",
  data_process: "Data processing",
  condition: "Condition",
  llm: "LLM",
  invoke: "Invoke",
  tool: "Tools",
};

export function filterBlocks(blocks: BlockSpec[], query: string): BlockSpec[] {
  const q = query.trim().toLowerCase();
  if (!q) return blocks;
  return blocks.filter((b) => `${b.name} ${blockTitle(b.name)} ${b.description} ${b.category} ${b.example}`.toLowerCase().includes(q));
}

interface Props {
  categories: string[];
  blocks: BlockSpec[];
  onAdd: (block: string) => void;
}

export const Palette = memo(function Palette({ categories, blocks, onAdd }: Props) {
  const [query, setQuery] = useState("");
  const [hover, setHover] = useState<{ block: BlockSpec; top: number } | null>(null);
  const shown = useMemo(() => filterBlocks(blocks, query), [blocks, query]);
  const groups = useMemo(() => {
    const order = [...categories, ...new Set(blocks.map((b) => b.category).filter((c) => !categories.includes(c)))];
    return order.map((c) => ({ category: c, blocks: shown.filter((b) => b.category === c) })).filter((g) => g.blocks.length > 0);
  }, [categories, blocks, shown]);
  return (
    <aside className="palette" data-testid="palette" onMouseLeave={() => setHover(null)}>
      <input
        className="input palette-search"
        type="search"
        placeholder="Search blocks…"
        aria-label="Search blocks"
        data-testid="palette-search"
        value={query}
        onChange={(e) => setQuery(e.target.value)}
      />
      <div className="palette-groups">
        {groups.length === 0 && <p className="muted small">No block matches “{query}”.</p>}
        {groups.map((g) => (
          <section key={g.category} className="palette-group" data-testid={`palette-category-${g.category}`}>
            <h3 className={`palette-cat cat-${g.category}`}>{CATEGORY_LABELS[g.category] ?? g.category}</h3>
            {g.blocks.map((b) => (
              <div
                key={b.name}
                className={`palette-item cat-${b.category}`}
                data-testid={`palette-block-${b.name}`}
                draggable
                tabIndex={0}
                role="button"
                aria-label={`${b.name}: ${b.description}`}
                onDragStart={(e) => {
                  e.dataTransfer.setData(BLOCK_MIME, b.name);
                  e.dataTransfer.setData("text/plain", b.name);
                  e.dataTransfer.effectAllowed = "copy";
                  setHover(null);
                }}
                onDoubleClick={() => onAdd(b.name)}
                onKeyDown={(e) => {
                  if (e.key === "Enter") onAdd(b.name);
                }}
                onMouseEnter={(e) => setHover({ block: b, top: (e.currentTarget as HTMLElement).getBoundingClientRect().top })}
                onFocus={(e) => setHover({ block: b, top: (e.currentTarget as HTMLElement).getBoundingClientRect().top })}
                onBlur={() => setHover(null)}
              >
                <span className="palette-name" title={b.name}>
                  <span className="block-icon">{blockIcon(b)}</span> {blockTitle(b.name)}
                </span>
                <span className="palette-desc">{b.description}</span>
              </div>
            ))}
          </section>
        ))}
      </div>
      {hover && (
        <div className="palette-hover" style={{ top: Math.max(8, Math.min(hover.top, window.innerHeight - 260)) }} data-testid="palette-hover" role="tooltip">
          <strong>{blockTitle(hover.block.name)}</strong> <span className="muted small">{blockKind(hover.block)} · {hover.block.name}</span>
          <p>{hover.block.description}</p>
          {hover.block.example && (
            <>
              <div className="muted small">Example</div>
              <code className="example">{hover.block.example}</code>
            </>
          )}
          <div className="palette-hover-ports small">
            {hover.block.inputs.length > 0 && <div>in: {hover.block.inputs.map((p) => `${p.name}: ${p.type}`).join(", ")}</div>}
            {hover.block.dynamic_inputs && <div>in: ports from the config ({hover.block.dynamic_inputs.type})</div>}
            <div>out: {hover.block.outputs.map((p) => `${p.name}: ${p.type}`).join(", ")}</div>
            {hover.block.branches !== undefined && <div>branches: {hover.block.branches ? hover.block.branches.join(", ") : "from the config"}</div>}
          </div>
        </div>
      )}
    </aside>
  );
});
