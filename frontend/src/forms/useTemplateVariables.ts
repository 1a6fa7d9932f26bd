// The variables a template field reads (the input ports it makes), asked of the server's own
// Jinja2 parser (POST /api/v1/template-variables) once typing pauses: the form and the
// validator cannot disagree. A template that does not parse keeps the last answer (the
// validation problem says why).

import { useEffect, useRef, useState } from "react";
import { api } from "../api/client";

const DEBOUNCE_MS = 250;

export function useTemplateVariables(template: string): string[] {
  const [variables, setVariables] = useState<string[]>([]);
  // The text the field opened with is asked at once (StrictMode's second run of the effect
  // included); every edit after a pause in typing, so a keystroke is not a POST.
  const opened = useRef<string | null>(null);
  useEffect(() => {
    opened.current ??= template;
    const call = new AbortController();
    const timer = setTimeout(
      () => {
        api.templateVariables(template, { signal: call.signal }).then(
          (found) => call.signal.aborted || setVariables(found),
          () => undefined, // does not parse, offline or cancelled: the last answer stands
        );
      },
      template === opened.current ? 0 : DEBOUNCE_MS,
    );
    return () => {
      clearTimeout(timer);
      call.abort(); // an answer for an older text must not land after a newer one
    };
  }, [template]);
  return variables;
}
