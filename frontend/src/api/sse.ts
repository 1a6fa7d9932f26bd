// A server-sent events parser (the WHATWG "event stream" format) for fetch() bodies:
// EventSource can only GET, and the debug run is a POST. Chunks may split anywhere — inside
// a line, between "\r" and "\n", inside a UTF-8 character — and the parser copes.

export interface SseMessage {
  event: string; // the `event:` field; "message" when there is none
  data: string; // the `data:` lines joined by "\n"
  id: string | null; // the last `id:` seen so far in the stream (what Last-Event-ID sends)
  retry?: number;
}

export class SseParser {
  private buffer = "";
  private skipLF = false; // the previous chunk ended on "\r": a leading "\n" belongs to it
  private data: string[] = [];
  private hasData = false;
  private eventType = "";
  private retry: number | undefined;
  lastEventId: string | null = null;
  comments = 0; // comment lines seen (a server's keep-alive pings)

  constructor(lastEventId: string | null = null) {
    this.lastEventId = lastEventId;
  }

  /** Feed decoded text; returns the events completed by it. */
  feed(text: string): SseMessage[] {
    const out: SseMessage[] = [];
    let chunk = text;
    if (this.skipLF && chunk.startsWith("\n")) chunk = chunk.slice(1);
    this.skipLF = false;
    this.buffer += chunk;
    let start = 0;
    const buf = this.buffer;
    for (let i = 0; i < buf.length; i++) {
      const c = buf.charCodeAt(i);
      if (c !== 10 && c !== 13) continue;
      this.line(buf.slice(start, i), out);
      if (c === 13) {
        if (i + 1 < buf.length) {
          if (buf.charCodeAt(i + 1) === 10) i++;
        } else {
          this.skipLF = true;
        }
      }
      start = i + 1;
    }
    this.buffer = buf.slice(start);
    return out;
  }

  /** The stream ended: an event without its closing blank line is dropped (as the spec says). */
  end(): SseMessage[] {
    this.buffer = "";
    this.data = [];
    this.hasData = false;
    this.eventType = "";
    return [];
  }

  private line(line: string, out: SseMessage[]): void {
    if (line === "") {
      this.dispatch(out);
      return;
    }
    if (line.startsWith(":")) {
      this.comments++; // a comment: a keep-alive ping
      return;
    }
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    switch (field) {
      case "event":
        this.eventType = value;
        break;
      case "data":
        this.data.push(value);
        this.hasData = true;
        break;
      case "id":
        if (!value.includes("\0")) this.lastEventId = value;
        break;
      case "retry":
        if (/^\d+$/.test(value)) this.retry = Number(value);
        break;
      default:
        break; // unknown fields are ignored
    }
  }

  private dispatch(out: SseMessage[]): void {
    if (this.hasData) {
      const message: SseMessage = {
        event: this.eventType || "message",
        data: this.data.join("\n"),
        id: this.lastEventId,
      };
      if (this.retry !== undefined) message.retry = this.retry;
      out.push(message);
    }
    this.data = [];
    this.hasData = false;
    this.eventType = "";
    this.retry = undefined;
  }
}

/** The events of a response body, as they arrive. Throws what the body's reader throws (a
 *  lost connection); returns when the server closes the stream. */
export async function* readSse(
  body: ReadableStream<Uint8Array>,
  parser: SseParser = new SseParser(),
  onBytes?: () => void, // every chunk, keep-alive comments included (a stall watchdog's pulse)
  signal?: AbortSignal, // stops the reading even when the body ignores fetch's own signal
): AsyncGenerator<SseMessage> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let finished = false;
  const stop = () => {
    reader.cancel().catch(() => undefined);
  };
  signal?.addEventListener("abort", stop);
  try {
    for (;;) {
      if (signal?.aborted) throw new DOMException("The stream was aborted.", "AbortError");
      const { done, value } = await reader.read();
      if (signal?.aborted) throw new DOMException("The stream was aborted.", "AbortError");
      if (done) break;
      const messages = parser.feed(decoder.decode(value, { stream: true }));
      onBytes?.();
      for (const message of messages) yield message;
    }
    finished = true;
    for (const message of parser.feed(decoder.decode())) yield message;
    parser.end();
  } finally {
    signal?.removeEventListener("abort", stop);
    // A consumer that stops early (or a read that failed) lets go of the connection.
    if (!finished) reader.cancel().catch(() => undefined);
    reader.releaseLock();
  }
}
