// The server's verdict on the flow (debounced POST /api/v1/validate after each edit, loud on
// Validate), tidied; what is shown is filtered by what the user has worked on until a
// Validate, a refused Save or a run makes every problem count.

import { useCallback, useEffect, useMemo, useRef, useState } from "react";
import { api } from "../../api/client";
import { ApiError } from "../../api/transport";
import type { FlowDocument, Problem } from "../../api/types";
import { toast, toastError } from "../../ui/toast";
import type { DecorationStore } from "../decorations";
import { shownProblems, tidyProblems } from "../problemView";

export interface Validation {
  /** The problems shown (on nodes worked on, or all once revealed). */
  problems: Problem[];
  /** How many more there are. */
  hiddenProblems: number;
  /** These nodes were worked on: their problems show. */
  touch: (...ids: string[]) => void;
  /** Ask the server now; `loud` reveals every problem and says the verdict in a toast. */
  validate: (doc: FlowDocument, loud: boolean) => Promise<void>;
  /** The server refused a save with these problems: show them all. */
  showProblems: (list: Problem[]) => void;
  revealAll: () => void;
}

export function useValidation(args: {
  flow: FlowDocument;
  revision: number;
  initialNodeIds: string[];
  decorations: DecorationStore;
}): Validation {
  const { flow, revision, initialNodeIds, decorations } = args;
  const [allProblems, setProblems] = useState<Problem[]>([]);
  const [touched, setTouched] = useState(() => new Set(initialNodeIds)); // an opened flow was worked on
  const [revealed, setRevealed] = useState(false);

  // Re-filters only when a node is first worked on: the same set stays otherwise.
  const touch = useCallback(
    (...ids: string[]) => setTouched((known) => (ids.every((id) => known.has(id)) ? known : new Set([...known, ...ids]))),
    [],
  );
  const problems = useMemo(() => shownProblems(allProblems, touched, revealed), [allProblems, touched, revealed]);
  useEffect(() => decorations.setProblems(problems), [decorations, problems]);

  const validationSeq = useRef(0);
  const validate = useCallback(async (doc: FlowDocument, loud: boolean) => {
    const seq = ++validationSeq.current;
    try {
      const result = await api.validate(doc);
      if (seq !== validationSeq.current) return;
      setProblems(tidyProblems(result.problems));
      if (loud) {
        setRevealed(true);
        const errors = result.problems.filter((p) => p.severity === "error").length;
        if (result.ok) toast("success", result.problems.length ? `Valid, with ${result.problems.length} warning(s)` : "The flow is valid");
        else toast("warning", `${errors} problem(s) to fix`, "See the problems list and the red badges.");
      }
    } catch (e) {
      if (loud || !(e instanceof ApiError && e.status === 0)) toastError(e, "Validation failed");
    }
  }, []);

  useEffect(() => {
    // On open, after the canvas has drawn (the server's answer is not needed to start work).
    const timer = setTimeout(() => validate(flow, false), revision === 0 ? 300 : 600);
    return () => clearTimeout(timer);
  }, [flow, validate, revision]);

  const showProblems = useCallback((list: Problem[]) => {
    validationSeq.current++;
    setRevealed(true); // the server refused a save: every problem counts now
    setProblems(tidyProblems(list));
  }, []);

  const revealAll = useCallback(() => setRevealed(true), []);

  return { problems, hiddenProblems: allProblems.length - problems.length, touch, validate, showProblems, revealAll };
}
