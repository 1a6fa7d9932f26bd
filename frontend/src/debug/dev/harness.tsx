// A dev-only page for trying the panel against a real `dagwright serve` (not part of the build).
import { useEffect, useState } from "react";
import { createRoot } from "react-dom/client";
import { DebugPanel, type NodeRunState } from "../DebugPanel";
import type { FlowDocument } from "../types";

function Harness() {
  const [text, setText] = useState("");
  const [flow, setFlow] = useState<FlowDocument | null>(null);
  const [selected, setSelected] = useState<string | null>(null);
  const [states, setStates] = useState<Record<string, NodeRunState>>({});
  const app = new URLSearchParams(location.search).get("app");
  useEffect(() => {
    const url = new URLSearchParams(location.search).get("flow") ?? "/harness-flows/parallel_chat.flow.json";
    fetch(url).then((r) => r.text()).then((t) => { setText(t); setFlow(JSON.parse(t)); });
  }, []);
  if (!flow) return <p>loading flow…</p>;
  return (
    <div style={{ display: "grid", gridTemplateColumns: "260px 1fr", height: "100vh" }}>
      <div style={{ borderRight: "1px solid #ddd", padding: 8, fontSize: 12, overflow: "auto" }}>
        <ul data-testid="canvas">
          {(flow.nodes ?? []).map((n) => (
            <li key={n.id} data-canvas-node={n.id} data-canvas-status={states[n.id]?.status ?? ""} onClick={() => setSelected(n.id)}
                style={{ cursor: "pointer", fontWeight: selected === n.id ? 700 : 400 }}>
              {n.id}: {states[n.id]?.status ?? "–"} {states[n.id]?.durationMs ?? ""}
            </li>
          ))}
        </ul>
        <textarea style={{ width: "100%", height: 300 }} value={text} onChange={(e) => { setText(e.target.value); try { setFlow(JSON.parse(e.target.value)); } catch { /* typing */ } }} />
      </div>
      <DebugPanel flow={flow} appSlug={app} selectedNodeId={selected} onSelectNode={setSelected} onNodeStates={setStates} />
    </div>
  );
}
createRoot(document.getElementById("root")!).render(<Harness />);
