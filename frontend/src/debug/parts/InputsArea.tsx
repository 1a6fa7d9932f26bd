// The Inputs area: the run form, or for a chat-shaped flow the conversation (with the form's
// other fields above it), and the tabs to switch between them.

import { streamedText } from "../runState";
import type { DebugRun } from "../hooks/useDebugRun";
import type { RunInputs } from "../hooks/useRunInputs";
import { ChatView } from "./ChatView";
import { InputsForm } from "./InputsForm";
import { Section } from "./Section";
import { ViewBoundary } from "./ViewBoundary";

export function InputsArea({ inputs, debug }: { inputs: RunInputs; debug: DebugRun }) {
  const { setup, mode, values } = inputs;
  const busy = debug.streaming;
  const streamNode = setup?.streamNode ? debug.run.nodes[setup.streamNode] : undefined;
  const chatStreaming = busy && streamNode ? streamedText(streamNode) : "";
  return (
    <Section
      title="Inputs"
      className="dw-area-inputs"
      extra={
        setup && (
          <span className="dw-tabs" role="tablist" aria-label="Inputs as">
            <button
              type="button"
              role="tab"
              aria-selected={mode === "form"}
              className={mode === "form" ? "dw-tab-on" : ""}
              onClick={() => inputs.setMode("form")}
            >
              Form
            </button>
            <button
              type="button"
              role="tab"
              aria-selected={mode === "chat"}
              className={mode === "chat" ? "dw-tab-on" : ""}
              onClick={() => inputs.setMode("chat")}
            >
              Chat
            </button>
          </span>
        )
      }
    >
      <ViewBoundary name="inputs">
        {mode === "chat" && setup ? (
          <>
            {setup.otherFields.length > 0 && (
              <InputsForm fields={setup.otherFields} values={values} errors={inputs.fieldErrors} onChange={inputs.setValue} />
            )}
            <ChatView
              setup={setup}
              transcript={inputs.transcript}
              streaming={chatStreaming}
              busy={busy}
              draft={inputs.draft}
              onDraft={inputs.setDraft}
              onSend={() => void inputs.send()}
              onReset={inputs.resetChat}
            />
          </>
        ) : (
          <InputsForm
            fields={inputs.fields}
            values={values}
            errors={inputs.fieldErrors}
            onChange={inputs.setValue}
            onSubmit={busy ? undefined : inputs.submit}
          />
        )}
      </ViewBoundary>
    </Section>
  );
}
