// Offline, AutoTQA is played by dagwright's scripted model, which knows only the demo's
// questions: the page says so before anyone asks, and offers those questions. (The server
// refuses any other question at once with the same explanation.)

import { useEffect, useState } from "react";
import { request } from "../api/transport";

interface TqaModel {
  scripted: boolean;
  offline_demo: boolean;
  questions: string[] | null;
}

export function ScriptedNotice({ onPick }: { onPick: (question: string) => void }) {
  const [model, setModel] = useState<TqaModel | null>(null);
  useEffect(() => {
    let live = true;
    request<TqaModel>("GET", "/api/v1/tqa/model").then(
      (m) => live && setModel(m),
      () => undefined, // an older server: no notice, the ask's own answer still explains
    );
    return () => {
      live = false;
    };
  }, []);
  if (!model?.scripted) return null;
  return (
    <div className="notice tqa-scripted" data-testid="tqa-scripted" role="note">
      <strong>Scripted model.</strong> No model provider is configured, so the agents are played by dagwright&apos;s scripted model: its answers are scripted, not a model&apos;s.
      {model.questions ? (
        <>
          {" "}
          It knows only these questions:
          <ul className="tqa-known">
            {model.questions.map((q) => (
              <li key={q}>
                <button type="button" className="link" data-testid="tqa-known-question" onClick={() => onPick(q)}>
                  {q}
                </button>
              </li>
            ))}
          </ul>
        </>
      ) : null}
      <span className="small muted">To ask your own, configure a provider in dagwright.toml (docs/llm.md).</span>
    </div>
  );
}
