// The save dialog saves once per request, whatever the keyboard does while the server works,
// and storage that refuses to keep the author does not cost the save.
import { act, cleanup, fireEvent, render, screen } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { emptyFlow } from "../../api/types";
import { SaveDialog } from "./SaveDialog";

const version = { id: "v1", number: 1, app_id: "a", parent_id: null, note: "n", author: "ada", created_at: "2026-01-01T00:00:00Z" };

afterEach(() => {
  cleanup();
  vi.restoreAllMocks();
  vi.unstubAllGlobals();
});

describe("SaveDialog", () => {
  it("sends one save for Ctrl+Enter pressed again while saving, with storage blocked", async () => {
    vi.spyOn(Storage.prototype, "setItem").mockImplementation(() => {
      throw new DOMException("blocked", "SecurityError");
    });
    const posts: unknown[] = [];
    let answer: () => void = () => {};
    vi.stubGlobal("fetch", (_url: string, init: RequestInit) => {
      posts.push(JSON.parse(String(init.body)));
      return new Promise<Response>((resolve) => (answer = () => resolve(new Response(JSON.stringify(version), { status: 201 }))));
    });
    const onSaved = vi.fn();
    render(<SaveDialog slug="s" flow={emptyFlow("s")} parentId={null} dirty onClose={() => {}} onSaved={onSaved} onProblems={() => {}} />);
    fireEvent.change(screen.getByTestId("save-author"), { target: { value: "ada" } });
    const note = screen.getByTestId("save-note");
    fireEvent.change(note, { target: { value: "first" } });
    fireEvent.keyDown(note, { key: "Enter", ctrlKey: true });
    fireEvent.keyDown(note, { key: "Enter", ctrlKey: true });
    expect(posts).toEqual([{ flow: emptyFlow("s"), note: "first", author: "ada", parent_id: null }]);
    await act(async () => answer());
    expect(onSaved).toHaveBeenCalledTimes(1);
    expect(screen.queryByTestId("save-error")).toBeNull();
  });
});
