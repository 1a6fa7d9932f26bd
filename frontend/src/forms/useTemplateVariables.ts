// The variables a template field reads (the input ports it makes), asked of the server's own
// Jinja2 parser (POST /api/v1/template-variables) once typing pauses: the form and the
// validator cannot disagree. A template that does not parse keeps the last answer (the
// validation problem says why).

import { useEffect, useState } from "react";
import { api } from "../api/client";

const DEBOUNCE_MS = 250;

export function useTemplateVariables(template: string): string[] {
  const [answer, setAnswer] = useState<{ template: string; variables: string[] }>({ template: "", variables: [] });
  useEffect(() => {
    let live = true;
    const timer = setTimeout(() => {
      api.templateVariables(template).then(
        (variables) => live && setAnswer({ template, variables }),
        () => undefined, // does not parse, or offline: the last answer stands
      );
    }, answer.template === "" ? 0 : DEBOUNCE_MS);
    return () => {
      live = false;
      clearTimeout(timer);
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps -- the first answer comes at once, later ones after a pause
  }, [template]);
  return answer.variables;
}
