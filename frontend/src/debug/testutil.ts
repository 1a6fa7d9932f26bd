// Test helpers: the recorded fixtures (real streams and traces captured from `dagwright serve`
// with the scripted model) and byte streams that arrive in chunks or break mid-way.

import parallelChatSse from "./fixtures/parallel_chat.sse?raw";
import parallelChatFlow from "./fixtures/parallel_chat.flow.json?raw";
import parallelChatRecord from "./fixtures/parallel_chat.record.json?raw";
import reuseSse from "./fixtures/reuse.sse?raw";
import reuseRecord from "./fixtures/reuse.record.json?raw";
import failSse from "./fixtures/fail.sse?raw";
import cancelSse from "./fixtures/cancel.sse?raw";
import mapSse from "./fixtures/map.sse?raw";
import mapFlow from "./fixtures/map.flow.json?raw";
import mapWaitingSse from "./fixtures/map_waiting.sse?raw";
import mapWaitingFlow from "./fixtures/map_waiting.flow.json?raw";
import { SseParser, type SseMessage } from "../api/sse";
import type { FlowDocument, RunRecord } from "./types";

export const fixtures = {
  parallelChatSse,
  parallelChatFlow: JSON.parse(parallelChatFlow) as FlowDocument,
  parallelChatRecord: JSON.parse(parallelChatRecord) as RunRecord,
  reuseSse,
  reuseRecord: JSON.parse(reuseRecord) as RunRecord,
  failSse,
  cancelSse,
  mapSse, // a map over a sub-flow, one item failing (skipped): backend/dagwright/runtime
  mapFlow: JSON.parse(mapFlow) as FlowDocument,
  // a debug run mapping over three drafts whose second asks a person (human_input): paused
  mapWaitingSse,
  mapWaitingFlow: JSON.parse(mapWaitingFlow) as FlowDocument,
};

export function messagesOf(text: string): SseMessage[] {
  const parser = new SseParser();
  return [...parser.feed(text), ...parser.end()];
}

/** The raw text of a stream cut into the events it holds (each with its blank line). */
export function rawEvents(text: string): string[] {
  return text
    .split(/\n\n/)
    .filter((block) => block.trim() !== "")
    .map((block) => `${block}\n\n`);
}

/** A byte stream delivering `chunks`, then ending — or failing, like a dropped connection. */
export function byteStream(
  chunks: (string | Uint8Array)[],
  end: "close" | "error" = "close",
  delayMs = 0, // between chunks: a slow server
): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  let i = 0;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (delayMs > 0 && i > 0) await new Promise((r) => setTimeout(r, delayMs));
      if (i < chunks.length) {
        const chunk = chunks[i++];
        controller.enqueue(typeof chunk === "string" ? encoder.encode(chunk) : chunk);
        return;
      }
      if (end === "error") controller.error(new TypeError("network error"));
      else controller.close();
    },
  });
}

/** Split bytes into pieces of the given sizes (cycled). */
export function splitBytes(bytes: Uint8Array, sizes: number[]): Uint8Array[] {
  const out: Uint8Array[] = [];
  let at = 0;
  let k = 0;
  while (at < bytes.length) {
    const size = Math.max(1, sizes[k++ % sizes.length]);
    out.push(bytes.slice(at, at + size));
    at += size;
  }
  return out;
}

export function sseResponse(body: ReadableStream<Uint8Array>, status = 200): Response {
  return new Response(body, { status, headers: { "Content-Type": "text/event-stream" } });
}

export function jsonResponse(data: unknown, status = 200): Response {
  return new Response(JSON.stringify(data), {
    status,
    headers: { "Content-Type": "application/json" },
  });
}
