// Loads an app, the version to open (a number from the route, else the newest) and any draft
// kept in this browser, then mounts the editor on that document. Opening another version
// remounts the editor on it.

import { ReactFlowProvider } from "@xyflow/react";
import { useCallback, useEffect, useRef, useState } from "react";
import { api } from "../api/client";
import { ApiError } from "../api/transport";
import { type AppOut, type FlowDocument, type VersionOut, emptyFlow } from "../api/types";
import { leaveMessage, navigate } from "../router";
import { ErrorBoundary } from "../ui/ErrorBoundary";
import { describeError } from "../ui/toast";
import { type Draft, clearDraft, flowFingerprint, loadDraft } from "./draft";
import { dropServerDraft, fetchServerDraft, newestDraft } from "./serverDraft";
import { type BaseVersion, FlowEditor } from "./FlowEditor";
import { useRegistry } from "./registry";

interface Loaded {
  app: AppOut;
  base: BaseVersion | null;
  initialFlow: FlowDocument;
  restored: Draft | null;
  pendingDraft: Draft | null;
  key: number;
}

let mountKey = 0;

async function loadDocument(slug: string, version: number | null, useDraft: "auto" | "force" | "never"): Promise<Loaded> {
  // In parallel: the app, and the version (named, else the newest).
  const [app, detail] = await Promise.all([
    api.getApp(slug),
    version !== null
      ? api.getVersion(slug, version)
      : api.listVersions(slug, 0, 1).then((page) => (page.items.length ? api.getVersion(slug, page.items[0].id) : null)),
  ]);
  let base: BaseVersion | null = detail ? { id: detail.id, number: detail.number, flow: detail.flow } : null;
  const draft = useDraft === "never" ? null : newestDraft(loadDraft(slug), await fetchServerDraft(slug));
  let initialFlow: FlowDocument = base ? base.flow : { ...emptyFlow(slug), name: slug };
  let restored: Draft | null = null;
  let pendingDraft: Draft | null = null;
  if (draft) {
    const sameBase = (draft.baseVersionId ?? null) === (base?.id ?? null);
    if (useDraft === "force" || version === null || sameBase) {
      if (!sameBase) {
        // The draft grew from another version: that one is its base (for dirtiness and parent).
        if (draft.baseVersionId) {
          const other = await api.getVersion(slug, draft.baseVersionId).catch(() => null);
          base = other ? { id: other.id, number: other.number, flow: other.flow } : base;
        } else base = null;
      }
      const baseFlow = base ? base.flow : { ...emptyFlow(slug), name: slug };
      if (flowFingerprint(draft.flow) === flowFingerprint(baseFlow)) {
        clearDraft(slug); // nothing unsaved after all
        dropServerDraft(slug);
        initialFlow = baseFlow;
      } else {
        initialFlow = draft.flow;
        restored = draft;
      }
    } else pendingDraft = draft;
  }
  return { app, base, initialFlow, restored, pendingDraft, key: ++mountKey };
}

type Request = { version: number | null; draft: "auto" | "force" | "never"; n: number };
const bump =
  (version: number | null, draft: Request["draft"]) =>
  (r: Request | null): Request => ({ version, draft, n: (r?.n ?? 0) + 1 });

export function EditorPage({ slug, version }: { slug: string; version: number | null }) {
  const { registry, error: registryError, reload: reloadRegistry, refreshSecrets } = useRegistry();
  const [loaded, setLoaded] = useState<Loaded | null>(null);
  const [error, setError] = useState<unknown>(null);
  const skipLoad = useRef<string | null>(null);
  const [request, setRequest] = useState<Request | null>(null);

  // The route changed: load that version (unless the editor itself moved the route to the
  // version it just saved).
  useEffect(() => {
    const key = `${slug}@${version}`;
    if (skipLoad.current === key) {
      skipLoad.current = null;
      return;
    }
    setRequest(bump(version, "auto"));
  }, [slug, version]);

  useEffect(() => {
    if (!request) return;
    let live = true;
    // eslint-disable-next-line react-hooks/set-state-in-effect -- a new load: the last one's error goes
    setError(null);
    loadDocument(slug, request.version, request.draft).then(
      (l) => live && setLoaded(l),
      (e: unknown) => live && setError(e),
    );
    return () => {
      live = false;
    };
  }, [slug, request]);

  const onSaved = useCallback(
    (v: VersionOut) => {
      skipLoad.current = `${slug}@${v.number}`;
      navigate({ page: "editor", slug, version: v.number }, { replace: true });
    },
    [slug],
  );
  const onOpenVersion = useCallback(
    (n: number) => {
      if (leaveMessage() && !window.confirm(`Open v${n}? The unsaved changes will be discarded.`)) return;
      clearDraft(slug);
      dropServerDraft(slug);
      if (n === version) setRequest(bump(n, "never"));
      else navigate({ page: "editor", slug, version: n }, { force: true });
    },
    [slug, version],
  );
  // The editor's useDrafts has dropped the draft: reopen the version it grew from.
  const onDiscardDraft = useCallback((base: BaseVersion | null) => setRequest(bump(base?.number ?? null, "never")), []);
  const onRestorePending = useCallback(() => setRequest((r) => bump(r?.version ?? null, "force")(r)), []);
  const onAppChange = useCallback((app: AppOut) => setLoaded((l) => (l ? { ...l, app } : l)), []);

  const failure = error ?? registryError;
  if (failure) {
    const { code, message } = describeError(failure);
    const notFound = failure instanceof ApiError && failure.status === 404;
    return (
      <div className="page-message" role="alert" data-testid="editor-error">
        <h2>{notFound ? `No app “${slug}”` : "The editor could not load"}</h2>
        <p>
          <code>{code}</code> {message}
        </p>
        <div className="row">
          {!notFound && (
            <button
              className="btn"
              onClick={() => {
                reloadRegistry();
                setRequest((r) => bump(r?.version ?? version, r?.draft ?? "auto")(r));
              }}
            >
              Try again
            </button>
          )}
          <a className="btn" href="#/">
            Back to apps
          </a>
        </div>
      </div>
    );
  }
  if (!registry || !loaded) return <div className="page-message muted">Loading {slug}…</div>;
  return (
    <ErrorBoundary area="editor" resetKey={loaded.key}>
      <ReactFlowProvider key={loaded.key}>
        <FlowEditor
          app={loaded.app}
          onAppChange={onAppChange}
          registry={registry}
          base={loaded.base}
          initialFlow={loaded.initialFlow}
          restored={loaded.restored}
          pendingDraft={loaded.pendingDraft}
          onRestorePending={onRestorePending}
          onDiscardDraft={onDiscardDraft}
          onSaved={onSaved}
          onOpenVersion={onOpenVersion}
          refreshSecrets={refreshSecrets}
        />
      </ReactFlowProvider>
    </ErrorBoundary>
  );
}
