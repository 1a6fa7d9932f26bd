// The editor's commands (copy, cut, paste, delete, select all, layout) and the keyboard
// shortcuts that call them (SHORTCUTS lists them for the help popover).

import type { ReactFlowInstance } from "@xyflow/react";
import { type RefObject, useCallback, useEffect, useRef } from "react";
import { type Clip, copySelection, deleteSelection, pasteClip } from "../clipboard";
import type { EditorEdge, EditorNode } from "../graph";
import { layoutGraph } from "../layout";
import { pointerPosition } from "../pointer";
import type { Registry } from "../registry";
import type { EditorGraph } from "./useEditorGraph";

const CLIP_KEY = "dagwright.clipboard";

export const SHORTCUTS: [string, string][] = [
  ["Ctrl/⌘ + C / X / V", "copy / cut / paste nodes"],
  ["Ctrl/⌘ + Z", "undo"],
  ["Ctrl/⌘ + Shift + Z, Ctrl + Y", "redo"],
  ["Delete / Backspace", "delete the selection"],
  ["Ctrl/⌘ + A", "select every node"],
  ["Shift + drag", "select with a box"],
  ["Ctrl/⌘ + click", "add to / remove from the selection"],
  ["Ctrl/⌘ + S", "save a version"],
  ["Ctrl/⌘ + Enter", "validate"],
  ["Shift + L", "auto-layout"],
  ["F", "fit the view"],
  ["Escape", "clear the selection"],
  ["?", "this help"],
];

export interface Commands {
  copy: () => boolean;
  paste: () => void;
  remove: () => void;
  selectAll: () => void;
  layout: () => void;
}

function isEditable(target: EventTarget | null): boolean {
  const el = target as HTMLElement | null;
  if (!el || !el.tagName) return false;
  return el.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(el.tagName);
}

export function useCommands(args: {
  editor: EditorGraph;
  rf: ReactFlowInstance<EditorNode, EditorEdge>;
  wrapperRef: RefObject<HTMLDivElement | null>;
  blocks: Registry["byName"];
}): Commands {
  const { editor, rf, wrapperRef, blocks } = args;
  const { graphRef, edit, replace } = editor;
  const clipRef = useRef<Clip | null>(null);
  const pasteCount = useRef(0);

  const copy = useCallback(() => {
    const clip = copySelection(graphRef.current);
    if (!clip) return false;
    clipRef.current = clip;
    pasteCount.current = 0;
    try {
      localStorage.setItem(CLIP_KEY, JSON.stringify(clip));
    } catch {
      // too big or disabled: this tab's copy still works
    }
    return true;
  }, [graphRef]);

  const paste = useCallback(() => {
    let clip = clipRef.current;
    if (!clip) {
      try {
        clip = JSON.parse(localStorage.getItem(CLIP_KEY) ?? "null") as Clip | null;
      } catch {
        clip = null;
      }
    }
    if (!clip || !clip.nodes.length) return;
    pasteCount.current += 1;
    let offset = { x: 40 * pasteCount.current, y: 40 * pasteCount.current };
    const rect = wrapperRef.current?.getBoundingClientRect();
    const pointer = pointerPosition();
    if (rect && pointer.x >= rect.left && pointer.x <= rect.right && pointer.y >= rect.top && pointer.y <= rect.bottom) {
      const at = rf.screenToFlowPosition(pointer);
      const minX = Math.min(...clip.nodes.map((n) => n.position?.x ?? 0));
      const minY = Math.min(...clip.nodes.map((n) => n.position?.y ?? 0));
      offset = { x: Math.round(at.x - minX) + (pasteCount.current - 1) * 20, y: Math.round(at.y - minY) + (pasteCount.current - 1) * 20 };
    }
    const c = clip;
    edit((g) => pasteClip(g, c, blocks, offset).graph);
  }, [blocks, edit, rf, wrapperRef]);

  const remove = useCallback(() => edit(deleteSelection), [edit]);
  const selectAll = useCallback(
    () => replace((g) => ({ ...g, nodes: g.nodes.map((n) => (n.selected ? n : { ...n, selected: true })) })),
    [replace],
  );
  const layout = useCallback(() => {
    const g = graphRef.current;
    const positions = layoutGraph(g.nodes, g.edges);
    edit((cur) => ({ ...cur, nodes: cur.nodes.map((n) => ({ ...n, position: positions.get(n.id) ?? n.position })) }));
    requestAnimationFrame(() => rf.fitView({ duration: 300, padding: 0.1 }));
  }, [edit, graphRef, rf]);

  return { copy, paste, remove, selectAll, layout };
}

export interface ShortcutActions extends Commands {
  undo: () => void;
  redo: () => void;
  save: () => void;
  validate: () => void;
  toggleHelp: () => void;
  fitView: () => void;
  clearSelection: () => void;
}

/** Binds the keyboard shortcuts on the window; `actions` may change every render. */
export function useShortcuts(actions: ShortcutActions): void {
  const latest = useRef(actions);
  useEffect(() => {
    latest.current = actions;
  });
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      const mod = e.ctrlKey || e.metaKey;
      const c = latest.current;
      if (mod && e.key.toLowerCase() === "s") {
        e.preventDefault();
        c.save();
        return;
      }
      if (isEditable(e.target) || document.querySelector(".modal-backdrop")) return;
      const key = e.key.toLowerCase();
      if (mod && key === "z" && !e.shiftKey) c.undo();
      else if (mod && ((key === "z" && e.shiftKey) || key === "y")) c.redo();
      else if (mod && key === "c") {
        if (!c.copy()) return;
      } else if (mod && key === "x") {
        if (c.copy()) c.remove();
      } else if (mod && key === "v") c.paste();
      else if (mod && key === "a") c.selectAll();
      else if (mod && key === "enter") c.validate();
      else if (!mod && (e.key === "Delete" || e.key === "Backspace")) c.remove();
      else if (!mod && e.key === "?") c.toggleHelp();
      else if (!mod && e.shiftKey && key === "l") c.layout();
      else if (!mod && !e.shiftKey && key === "f") c.fitView();
      else if (e.key === "Escape") c.clearSelection();
      else return;
      e.preventDefault();
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, []);
}
