// What a run is started with: the form (one field per input node) or, for a chat-shaped flow,
// the conversation, whose next turn is a run and whose reply is that run's answer output.

import { useCallback, useMemo, useState } from "react";
import type { PanelError } from "../format";
import {
  answerText,
  chatInputs,
  chatSetup,
  inputFields,
  parseInputs,
  syncValues,
  valuesFromInputs,
  type ChatMessage,
  type ChatSetup,
  type FormValues,
  type InputField,
} from "../inputs";
import { runScripted } from "../runState";
import type { FlowDocument } from "../types";
import type { DebugRun } from "./useDebugRun";

export interface RunInputs {
  fields: InputField[];
  /** How chat mode talks to the flow; null when the flow is not chat-shaped. */
  setup: ChatSetup | null;
  values: FormValues;
  setValue: (name: string, value: FormValues[string]) => void;
  /** Fill the form with a past run's inputs. */
  fillFrom: (inputs: Record<string, unknown>) => void;
  fieldErrors: Record<string, string>;
  mode: "form" | "chat";
  setMode: (mode: "form" | "chat") => void;
  transcript: ChatMessage[];
  resetChat: () => void;
  draft: string;
  setDraft: (text: string) => void;
  /** Run with the form's inputs (a field that does not parse stops it, shown in the form). */
  submit: () => void;
  /** Send the chat's draft as the next turn. */
  send: () => Promise<void>;
}

function inputsError(errors: Record<string, string>): PanelError {
  return {
    title: "Some inputs need fixing",
    message: Object.entries(errors)
      .map(([name, problem]) => `${name}: ${problem}`)
      .join("; "),
  };
}

export function useRunInputs(flow: FlowDocument, debug: Pick<DebugRun, "runFlow" | "setError">): RunInputs {
  const { runFlow, setError } = debug;
  const fields = useMemo(() => inputFields(flow), [flow]);
  const setup = useMemo(() => chatSetup(flow, fields), [flow, fields]);

  const [typed, setTyped] = useState<FormValues>({});
  const values = useMemo(() => syncValues(fields, typed), [fields, typed]);
  const [fieldErrors, setFieldErrors] = useState<Record<string, string>>({});
  const [modePref, setModePref] = useState<"form" | "chat" | null>(null);
  const mode = setup ? (modePref ?? "chat") : "form";
  const [transcript, setTranscript] = useState<ChatMessage[]>([]);
  const [draft, setDraft] = useState("");

  const setValue = useCallback((name: string, value: FormValues[string]) => setTyped({ ...values, [name]: value }), [values]);
  const fillFrom = useCallback((inputs: Record<string, unknown>) => setTyped(valuesFromInputs(fields, inputs)), [fields]);

  const submit = useCallback(() => {
    const parsed = parseInputs(fields, values);
    setFieldErrors(parsed.errors);
    if (Object.keys(parsed.errors).length > 0) {
      setModePref("form"); // show the fields to fix
      setError(inputsError(parsed.errors));
      return;
    }
    void runFlow(parsed.inputs);
  }, [fields, values, runFlow, setError]);

  const send = useCallback(async () => {
    const text = draft;
    if (!setup || !text.trim()) return;
    const parsed = parseInputs(setup.otherFields, values);
    setFieldErrors(parsed.errors);
    if (Object.keys(parsed.errors).length > 0) {
      setError({ title: "Some inputs need fixing", message: Object.keys(parsed.errors).join(", ") });
      return;
    }
    const inputs = chatInputs(setup, transcript, text, parsed.inputs);
    setDraft("");
    setTranscript((t) => [...t, { role: "user", content: text }, { role: "assistant", content: "", pending: true }]);
    const { state, error: failure } = await runFlow(inputs);
    let reply: ChatMessage;
    if (state && state.phase === "succeeded") {
      const outputs = state.outputs ?? {};
      reply =
        setup.answer in outputs
          ? { role: "assistant", content: answerText(outputs[setup.answer]), runId: state.runId ?? undefined, scripted: runScripted(state) }
          : {
              role: "assistant",
              content: "",
              runId: state.runId ?? undefined,
              error: `The run returned no "${setup.answer}" (its branch was skipped).`,
            };
    } else {
      reply = {
        role: "assistant",
        content: "",
        runId: state?.runId ?? undefined,
        error: state?.error?.message ?? failure?.message ?? (state ? `The run ended ${state.phase}.` : "The run did not finish."),
      };
    }
    setTranscript((t) => {
      const copy = t.slice();
      const at = copy.map((m) => m.pending).lastIndexOf(true);
      if (at >= 0) copy[at] = reply;
      return copy;
    });
  }, [draft, setup, values, transcript, runFlow, setError]);

  const resetChat = useCallback(() => setTranscript([]), []);

  return { fields, setup, values, setValue, fillFrom, fieldErrors, mode, setMode: setModePref, transcript, resetChat, draft, setDraft, submit, send };
}
