// Picks an LLM block's provider and model together from what the server has configured,
// instead of two empty free-text boxes. The scripted model is labelled: its answers are
// scripted, not a model's. Another model name can still be typed under "Advanced".

import { useEffect, useState } from "react";
import { type ModelsOut, fetchModels } from "../api/models";

const DEFAULT = "";

export function modelLabel(option: { provider: string; model: string; scripted: boolean }): string {
  return option.scripted ? `${option.provider} · ${option.model} (scripted answers, not a model)` : `${option.provider} · ${option.model}`;
}

export function ModelPicker({ provider, model, onPick }: { provider: unknown; model: unknown; onPick: (provider: string | null, model: string | null) => void }) {
  const [models, setModels] = useState<ModelsOut | null>(null);
  const [failed, setFailed] = useState(false);
  useEffect(() => {
    let live = true;
    fetchModels().then(
      (m) => live && setModels(m),
      () => live && setFailed(true),
    );
    return () => {
      live = false;
    };
  }, []);
  const current = typeof provider === "string" && provider ? `${provider}\u0000${typeof model === "string" ? model : ""}` : DEFAULT;
  const options = models?.models ?? [];
  const known = current === DEFAULT || options.some((o) => `${o.provider}\u0000${o.model}` === current);
  const fallback = options.find((o) => o.default);
  return (
    <div className="field">
      <label className="field-title" htmlFor="model-picker">
        Model
      </label>
      <select
        id="model-picker"
        className="input"
        data-testid="config-model-picker"
        value={known ? current : "custom"}
        onChange={(e) => {
          if (e.target.value === DEFAULT) onPick(null, null);
          else {
            const [p, m] = e.target.value.split("\u0000");
            onPick(p, m);
          }
        }}
      >
        <option value={DEFAULT}>{fallback ? `Default: ${modelLabel(fallback)}` : "Default model"}</option>
        {options.map((o) => (
          <option key={o.provider} value={`${o.provider}\u0000${o.model}`}>
            {modelLabel(o)}
          </option>
        ))}
        {!known && <option value="custom">{`${String(provider)} · ${String(model ?? "its default")}`}</option>}
      </select>
      {models?.scripted_only && (
        <div className="field-help" data-testid="model-picker-scripted">
          No model provider is configured: answers come from dagwright's scripted model. Add one in dagwright.toml (see the README).
        </div>
      )}
      {failed && <div className="field-help">The server's model list could not be read; type a provider and model under Advanced.</div>}
    </div>
  );
}
