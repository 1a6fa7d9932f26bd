// Chat mode: the conversation so far, the reply streaming in, and a box to send the next turn.

import { useEffect, useRef } from "react";
import type { ChatMessage, ChatSetup } from "../inputs";
import { ScriptedLabel } from "./status";

export function ChatView({
  setup,
  transcript,
  streaming,
  busy,
  draft,
  onDraft,
  onSend,
  onReset,
}: {
  setup: ChatSetup;
  transcript: ChatMessage[];
  streaming: string; // the pending reply's tokens so far
  busy: boolean;
  draft: string;
  onDraft: (text: string) => void;
  onSend: () => void;
  onReset: () => void;
}) {
  const end = useRef<HTMLDivElement>(null);
  useEffect(() => {
    end.current?.scrollIntoView?.({ block: "nearest" });
  }, [transcript.length, streaming]);
  return (
    <div className="dw-chat">
      <div className="dw-chat-log" aria-live="polite">
        {transcript.length === 0 && (
          <div className="dw-muted">
            {setup.kind === "conversation"
              ? `Each message runs the flow with the conversation so far as "${setup.input}"; "${setup.answer}" is the reply.`
              : `Each message runs the flow with it as "${setup.input}"; "${setup.answer}" is the reply.`}
          </div>
        )}
        {transcript.map((m, i) => (
          <div key={i} className={`dw-msg dw-msg-${m.role}${m.error ? " dw-msg-error" : ""}`}>
            <div className="dw-msg-role">
              {m.role}
              {m.scripted && <ScriptedLabel />}
            </div>
            <div className="dw-msg-text">
              {m.pending ? (
                streaming ? (
                  <>
                    {streaming}
                    <span className="dw-caret" />
                  </>
                ) : (
                  <span className="dw-muted">running…</span>
                )
              ) : m.error ? (
                m.error
              ) : (
                m.content
              )}
            </div>
          </div>
        ))}
        <div ref={end} />
      </div>
      <div className="dw-chat-compose">
        <textarea
          data-testid="chat-input"
          aria-label="Message"
          rows={2}
          value={draft}
          placeholder="Message (Enter to send, Shift+Enter for a new line)"
          onChange={(e) => onDraft(e.target.value)}
          onKeyDown={(e) => {
            if (e.key === "Enter" && !e.shiftKey) {
              e.preventDefault();
              if (!busy && draft.trim()) onSend();
            }
          }}
        />
        <div className="dw-chat-buttons">
          <button
            type="button"
            data-testid="chat-send"
            className="dw-primary"
            disabled={busy || !draft.trim()}
            onClick={onSend}
          >
            Send
          </button>
          <button type="button" disabled={busy || transcript.length === 0} onClick={onReset}>
            New chat
          </button>
        </div>
      </div>
    </div>
  );
}
