// An app's triggers: cron schedules and webhooks, each firing a recorded run.

import { useCallback, useEffect, useState } from "react";
import { ApiError } from "../api/transport";
import { triggersApi, type Firing, type Trigger } from "./api";

export function TriggersPage({ slug }: { slug: string }) {
  const [triggers, setTriggers] = useState<Trigger[]>([]);
  const [error, setError] = useState<string | null>(null);
  const fail = (e: unknown) => setError(e instanceof ApiError ? e.message : String(e));
  const refresh = useCallback(() => {
    triggersApi.list(slug).then((t) => (setTriggers(t), setError(null)), fail);
  }, [slug]);
  useEffect(refresh, [refresh]);
  return (
    <div className="eval-page">
      <header className="page-head">
        <h1>
          <a href="#/">dagwright</a> <a href={`#/apps/${encodeURIComponent(slug)}`}>{slug}</a>{" "}
          <span className="muted">triggers</span>
        </h1>
      </header>
      {error && <p role="alert">{error}</p>}
      <NewTrigger slug={slug} onCreated={refresh} onError={fail} />
      {triggers.length === 0 && <p className="muted">No trigger yet.</p>}
      {triggers.map((t) => (
        <TriggerRow key={t.id} trigger={t} onChanged={refresh} onError={fail} />
      ))}
    </div>
  );
}

function NewTrigger({ slug, onCreated, onError }: { slug: string; onCreated: () => void; onError: (e: unknown) => void }) {
  const [kind, setKind] = useState<"cron" | "webhook">("cron");
  const [name, setName] = useState("");
  const [cron, setCron] = useState("0 9 * * 1-5");
  const [timezone, setTimezone] = useState("UTC");
  const [catchUp, setCatchUp] = useState<Trigger["catch_up"]>("latest");
  const [inputs, setInputs] = useState("{}");
  const [secret, setSecret] = useState("");
  const create = () => {
    let parsed: Record<string, unknown>;
    try {
      parsed = JSON.parse(inputs || "{}") as Record<string, unknown>;
    } catch {
      onError(new Error(kind === "cron" ? "Inputs must be a JSON object." : "The mapping must be a JSON object."));
      return;
    }
    const body: Partial<Trigger> =
      kind === "cron"
        ? { kind, name: name || "schedule", cron, timezone, catch_up: catchUp, inputs: parsed }
        : { kind, name: name || "webhook", input_map: parsed as Record<string, string>, secret_name: secret || null };
    triggersApi.create(slug, body).then(onCreated, onError);
  };
  return (
    <section className="eval-box" aria-label="New trigger">
      <h2>New trigger</h2>
      <label>
        Kind{" "}
        <select aria-label="Kind" value={kind} onChange={(e) => setKind(e.target.value as "cron" | "webhook")}>
          <option value="cron">cron schedule</option>
          <option value="webhook">webhook</option>
        </select>
      </label>
      <label>
        Name <input className="input" aria-label="Name" value={name} onChange={(e) => setName(e.target.value)} />
      </label>
      {kind === "cron" ? (
        <>
          <label>
            Schedule <input className="input" aria-label="Schedule" value={cron} onChange={(e) => setCron(e.target.value)} />
          </label>
          <label>
            Time zone <input className="input" aria-label="Time zone" value={timezone} onChange={(e) => setTimezone(e.target.value)} />
          </label>
          <label>
            Missed ticks{" "}
            <select aria-label="Missed ticks" value={catchUp} onChange={(e) => setCatchUp(e.target.value as Trigger["catch_up"])}>
              <option value="latest">run the latest once</option>
              <option value="skip">skip them</option>
              <option value="all">run each</option>
            </select>
          </label>
          <label>
            Inputs (JSON) <input className="input" aria-label="Inputs" value={inputs} onChange={(e) => setInputs(e.target.value)} />
          </label>
        </>
      ) : (
        <>
          <label>
            Body mapping (JSON: input → path){" "}
            <input className="input" aria-label="Body mapping" value={inputs} onChange={(e) => setInputs(e.target.value)} />
          </label>
          <label>
            Signing secret (name, required){" "}
            <input className="input" aria-label="Signing secret" value={secret} onChange={(e) => setSecret(e.target.value)} />
          </label>
          <p className="muted">
            The name of a secret set first (Secrets, or PUT /api/v1/secrets/&lt;name&gt;). <SignatureFormat />
          </p>
        </>
      )}
      <button className="btn btn-primary" onClick={create}>
        Add trigger
      </button>
    </section>
  );
}

// How a webhook call is signed (docs/integrations.md#webhooks, services/webhook_signing.py).
function SignatureFormat() {
  return (
    <>
      Each call sends <code>X-Dagwright-Timestamp: &lt;Unix seconds&gt;</code> and{" "}
      <code>X-Dagwright-Signature: sha256=&lt;hex HMAC-SHA256 of &quot;&lt;timestamp&gt;.&lt;body&gt;&quot; with the secret&gt;</code>; a call
      more than 5 minutes old, or sent twice, is refused.
    </>
  );
}

function TriggerRow({ trigger, onChanged, onError }: { trigger: Trigger; onChanged: () => void; onError: (e: unknown) => void }) {
  const [firings, setFirings] = useState<Firing[] | null>(null);
  return (
    <section className="eval-box" aria-label={`Trigger ${trigger.name}`} data-testid={`trigger-${trigger.name}`}>
      <h2>
        {trigger.name} <span className="muted">{trigger.kind}</span> {trigger.enabled ? "" : <span className="muted">(disabled)</span>}
      </h2>
      {trigger.kind === "cron" ? (
        <p>
          <code>{trigger.cron}</code> in {trigger.timezone}, missed ticks: {trigger.catch_up}
        </p>
      ) : (
        <p>
          POST <code data-testid="webhook-url">{window.location.origin + (trigger.url ?? "")}</code>
          {trigger.secret_name ? (
            <>
              {" "}
              signed with the secret <code>{trigger.secret_name}</code>. <SignatureFormat />
            </>
          ) : (
            " (no secret: it refuses every call until one is set)"
          )}
        </p>
      )}
      <button className="btn" onClick={() => triggersApi.update(trigger.id, { enabled: !trigger.enabled }).then(onChanged, onError)}>
        {trigger.enabled ? "Disable" : "Enable"}
      </button>{" "}
      <button className="btn" onClick={() => triggersApi.firings(trigger.id).then(setFirings, onError)}>
        Firings
      </button>{" "}
      <button className="btn" onClick={() => triggersApi.remove(trigger.id).then(onChanged, onError)}>
        Delete
      </button>
      {firings && (
        <ul aria-label="Firings">
          {firings.length === 0 && <li className="muted">None yet.</li>}
          {firings.map((f) => (
            <li key={f.id}>
              {new Date(f.tick).toLocaleString()} — {f.error ?? (f.run_id ? `run ${f.run_id}` : f.status)}
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}
