// A template field asks the server for its variables: the text it opened with at once, then
// once per pause in typing (not per keystroke), and an answer for an older text never lands
// after a newer one.
import { act, cleanup, renderHook } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { useTemplateVariables } from "./useTemplateVariables";

/** A server that answers each POST with the names between {{ }} once the test says so. */
function scriptedParser() {
  const asked: string[] = [];
  const release: (() => void)[] = [];
  vi.stubGlobal("fetch", (_url: string, init: RequestInit) => {
    const { template } = JSON.parse(String(init.body)) as { template: string };
    asked.push(template);
    const variables = [...template.matchAll(/\{\{\s*(\w+)\s*\}\}/g)].map((m) => m[1]);
    return new Promise<Response>((resolve) => release.push(() => resolve(new Response(JSON.stringify({ variables }), { status: 200 }))));
  });
  return { asked, release };
}

beforeEach(() => vi.useFakeTimers());
afterEach(() => {
  cleanup();
  vi.useRealTimers();
  vi.unstubAllGlobals();
});

describe("useTemplateVariables", () => {
  it("asks for the opening text at once, then once per pause, not per keystroke", async () => {
    const server = scriptedParser();
    const { result, rerender } = renderHook(({ text }) => useTemplateVariables(text), { initialProps: { text: "" } });
    await act(() => vi.advanceTimersByTimeAsync(0));
    expect(server.asked).toEqual([""]);

    // Typed before any answer came: still one call for the whole burst.
    for (const text of ["{", "{{", "{{ n", "{{ na", "{{ name }}"]) {
      rerender({ text });
      await act(() => vi.advanceTimersByTimeAsync(50));
    }
    expect(server.asked).toEqual([""]);
    await act(() => vi.advanceTimersByTimeAsync(250));
    expect(server.asked).toEqual(["", "{{ name }}"]);
    await act(async () => server.release.forEach((r) => r()));
    expect(result.current).toEqual(["name"]);
  });

  it("drops the answer for a text edited since", async () => {
    const server = scriptedParser();
    const { result, rerender } = renderHook(({ text }) => useTemplateVariables(text), { initialProps: { text: "{{ a }}" } });
    await act(() => vi.advanceTimersByTimeAsync(0));
    rerender({ text: "{{ b }}" });
    await act(() => vi.advanceTimersByTimeAsync(250));
    expect(server.asked).toEqual(["{{ a }}", "{{ b }}"]);
    // The newer answer first, then the older one late.
    await act(async () => server.release[1]());
    await act(async () => server.release[0]());
    expect(result.current).toEqual(["b"]);
  });
});
