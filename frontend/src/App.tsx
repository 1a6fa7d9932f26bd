import { useEffect, useState } from "react";
import { AppList } from "./apps/AppList";
import { EditorPage } from "./editor/EditorPage";
import { TqaPage } from "./tqa/TqaPage";
import { EvaluationsPage } from "./evaluations/EvaluationsPage";
import { TriggersPage } from "./integrations/TriggersPage";
import { WaitingPage } from "./integrations/WaitingPage";
import { InterfacesPage } from "./interfaces/InterfacesPage";
import { ExamplesPage } from "./examples/ExamplesPage";
import { ADMIN_TOKEN_EVENT, adminToken, setAdminToken } from "./api/transport";
import { useRoute } from "./router";
import { ErrorBoundary } from "./ui/ErrorBoundary";
import { Toaster } from "./ui/toast";

export function App() {
  const route = useRoute();
  const routeKey = route.page === "editor" ? `editor:${route.slug}` : route.page;
  return (
    <>
      <ErrorBoundary resetKey={routeKey}>
        {route.page === "editor" ? (
          <EditorPage key={route.slug} slug={route.slug} version={route.version} />
        ) : route.page === "tqa" ? (
          <TqaPage conversationId={route.conversation} />
        ) : route.page === "evaluations" ? (
          <EvaluationsPage evaluationId={route.evaluation} />
        ) : route.page === "waiting" ? (
          <WaitingPage />
        ) : route.page === "interfaces" ? (
          <InterfacesPage source={route.source} />
        ) : route.page === "triggers" ? (
          <TriggersPage slug={route.slug} />
        ) : route.page === "examples" ? (
          <ExamplesPage />
        ) : (
          <AppList />
        )}
      </ErrorBoundary>
      <AdminTokenPrompt />
      <Toaster />
    </>
  );
}

/** When the server wants the admin token (it listens beyond loopback), ask for it once. */
function AdminTokenPrompt() {
  const [open, setOpen] = useState(false);
  const [token, setToken] = useState(adminToken());
  useEffect(() => {
    const ask = () => setOpen(true);
    window.addEventListener(ADMIN_TOKEN_EVENT, ask);
    return () => window.removeEventListener(ADMIN_TOKEN_EVENT, ask);
  }, []);
  if (!open) return null;
  return (
    <div className="token-bar" role="dialog" aria-label="Admin token">
      <label htmlFor="admin-token">The server needs the admin token (DAGWRIGHT_ADMIN_TOKEN):</label>
      <input id="admin-token" className="input" type="password" data-testid="admin-token" value={token} onChange={(e) => setToken(e.target.value)} />
      <button
        className="btn btn-primary"
        onClick={() => {
          setAdminToken(token.trim());
          window.location.reload();
        }}
      >
        Use it
      </button>
      <button className="btn" onClick={() => setOpen(false)}>
        Close
      </button>
    </div>
  );
}
