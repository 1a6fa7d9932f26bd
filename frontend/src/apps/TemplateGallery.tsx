// The home page's template gallery: every shipped flow with its description and a drawing of
// its shape; one click makes an app from it and opens it.

import { useEffect, useState } from "react";
import { navigate } from "../router";
import { toastError } from "../ui/toast";
import { type TemplateOut, createFromTemplate, listTemplates } from "./templates";

const W = 160;
const H = 70;

export function TemplatePreview({ template }: { template: TemplateOut }) {
  const xs = template.preview.map((n) => n.x);
  const ys = template.preview.map((n) => n.y);
  const [x0, y0] = [Math.min(...xs, 0), Math.min(...ys, 0)];
  const spanX = Math.max(...xs, 1) - x0 + 220;
  const spanY = Math.max(...ys, 1) - y0 + 80;
  const scale = Math.min(W / spanX, H / spanY);
  const at = (i: number) => ({ x: (template.preview[i].x - x0) * scale, y: (template.preview[i].y - y0) * scale });
  return (
    <svg className="template-preview" width={W} height={H} viewBox={`0 0 ${W} ${H}`} aria-hidden="true">
      {template.edges.map(([a, b], i) => (
        <line key={i} x1={at(a).x + 220 * scale} y1={at(a).y + 20 * scale} x2={at(b).x} y2={at(b).y + 20 * scale} stroke="#adb5bd" strokeWidth={1} />
      ))}
      {template.preview.map((n, i) => (
        <rect key={i} x={at(i).x} y={at(i).y} width={220 * scale} height={Math.max(3, 40 * scale)} rx={2} className={`tp-node tp-${n.block.includes("input") ? "input" : n.block === "output" ? "output" : "block"}`} />
      ))}
    </svg>
  );
}

export function TemplateGallery({ taken }: { taken: ReadonlySet<string> }) {
  const [templates, setTemplates] = useState<TemplateOut[] | null>(null);
  const [busy, setBusy] = useState<string | null>(null);
  useEffect(() => {
    listTemplates().then(setTemplates, () => setTemplates([]));
  }, []);
  if (!templates || templates.length === 0) return null;
  const groups = [...new Set(templates.map((t) => t.group))];
  const use = async (template: TemplateOut) => {
    setBusy(template.id);
    try {
      const app = await createFromTemplate(template, taken);
      navigate({ page: "editor", slug: app.slug, version: null });
    } catch (e) {
      toastError(e, `Could not make an app from ${template.name}`);
      setBusy(null);
    }
  };
  return (
    <section className="template-gallery" data-testid="templates">
      <h2>Start from a template</h2>
      {groups.map((group) => (
        <div key={group}>
          <h3 className="muted">{group}</h3>
          <div className="template-cards">
            {templates
              .filter((t) => t.group === group)
              .map((t) => (
                <button key={t.id} className="template-card" data-testid={`template-${t.id.replace(/\//g, "-")}`} disabled={busy !== null} onClick={() => void use(t)} title={`Make an app from ${t.id}`}>
                  <TemplatePreview template={t} />
                  <strong>{t.name.replace(/_/g, " ")}</strong>
                  <span className="muted small">{t.nodes} blocks</span>
                  <span className="template-desc">{t.description}</span>
                </button>
              ))}
          </div>
        </div>
      ))}
    </section>
  );
}
