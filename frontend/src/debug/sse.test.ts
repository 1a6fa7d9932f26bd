// @vitest-environment node
import { describe, expect, it } from "vitest";
import { readSse, SseParser, type SseMessage } from "../api/sse";
import { byteStream, fixtures, messagesOf, splitBytes } from "./testutil";

async function collect(stream: ReadableStream<Uint8Array>): Promise<SseMessage[]> {
  const out: SseMessage[] = [];
  for await (const message of readSse(stream)) out.push(message);
  return out;
}

describe("SseParser", () => {
  it("reads a real stream: every event, its name, data and id", () => {
    const messages = messagesOf(fixtures.parallelChatSse);
    const names = fixtures.parallelChatSse.match(/^event: .*$/gm)!.map((l) => l.slice(7));
    expect(messages.map((m) => m.event)).toEqual(names);
    expect(messages.map((m) => m.id)).toEqual(names.map((_, i) => String(i)));
    expect(messages[0].event).toBe("run_started");
    expect(messages.at(-1)!.event).toBe("result");
    for (const m of messages) expect(() => JSON.parse(m.data)).not.toThrow();
  });

  it("gives the same events whatever the chunking, down to one character", () => {
    const whole = messagesOf(fixtures.parallelChatSse);
    const text = fixtures.parallelChatSse;
    for (const size of [1, 2, 3, 7, 64, 500]) {
      const parser = new SseParser();
      const out: SseMessage[] = [];
      for (let i = 0; i < text.length; i += size) out.push(...parser.feed(text.slice(i, i + size)));
      expect(out).toEqual(whole);
    }
  });

  it("handles CRLF and CR line ends, also split between \\r and \\n", () => {
    const text = "event: a\r\ndata: 1\r\nid: 5\r\n\r\nevent: b\rdata: 2\r\r";
    const expected = [
      { event: "a", data: "1", id: "5" },
      { event: "b", data: "2", id: "5" },
    ];
    expect(messagesOf(text)).toEqual(expected);
    for (let cut = 1; cut < text.length; cut++) {
      const parser = new SseParser();
      const out = [...parser.feed(text.slice(0, cut)), ...parser.feed(text.slice(cut))];
      expect(out).toEqual(expected);
    }
  });

  it("follows the spec's field rules", () => {
    const text = [
      ": a comment (keep-alive)",
      "data:no space",
      "data:  two spaces",
      "",
      "event: only-a-name", // no data: not dispatched
      "",
      "data",
      "",
      "id: 7",
      "retry: 1500",
      "data: {}",
      "unknown: field",
      "",
      "data: cut off at the end",
    ].join("\n");
    const parser = new SseParser();
    const out = [...parser.feed(text), ...parser.end()];
    expect(out).toEqual([
      { event: "message", data: "no space\n two spaces", id: null },
      { event: "message", data: "", id: null },
      { event: "message", data: "{}", id: "7", retry: 1500 },
    ]);
  });
});

describe("readSse", () => {
  it("decodes UTF-8 split inside a character across byte chunks", async () => {
    const text = 'event: node_message\ndata: {"text":"héllo wörld — 日本 🎉"}\nid: 3\n\n';
    const bytes = new TextEncoder().encode(text);
    for (const sizes of [[1], [2, 3], [5, 1, 4]]) {
      const out = await collect(byteStream(splitBytes(bytes, sizes)));
      expect(out).toHaveLength(1);
      expect(JSON.parse(out[0].data).text).toBe("héllo wörld — 日本 🎉");
      expect(out[0].id).toBe("3");
    }
  });

  it("reads a real stream in odd byte chunks", async () => {
    const bytes = new TextEncoder().encode(fixtures.parallelChatSse);
    const out = await collect(byteStream(splitBytes(bytes, [13, 1, 97, 4096])));
    expect(out).toEqual(messagesOf(fixtures.parallelChatSse));
  });

  it("yields what arrived before the connection broke, then throws", async () => {
    const text = fixtures.parallelChatSse;
    const cut = text.indexOf("id: 5\n\n") + "id: 5\n\n".length + 20; // mid-way into event 6
    const out: SseMessage[] = [];
    await expect(async () => {
      for await (const m of readSse(byteStream([text.slice(0, cut)], "error"))) out.push(m);
    }).rejects.toThrow("network error");
    expect(out.map((m) => m.id)).toEqual(["0", "1", "2", "3", "4", "5"]);
  });
});
