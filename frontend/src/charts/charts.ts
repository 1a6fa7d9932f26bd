// Charts as values: a chart is a Vega-Lite spec with its data inline (backend:
// dagwright/charts.py). Any output may hold some, at any depth (Data-Copilot's answer keeps
// them in `charts`); these functions find them so the views can draw them beside the JSON.

export type ChartSpec = { $schema: string; [key: string]: unknown };

export type FoundChart = { path: string; spec: ChartSpec };

const MAX_CHARTS = 12; // drawn per value: more is a table's job, not a panel's
const MAX_DEPTH = 6;

export function isChartSpec(value: unknown): value is ChartSpec {
  return (
    !!value &&
    typeof value === "object" &&
    !Array.isArray(value) &&
    typeof (value as { $schema?: unknown }).$schema === "string" &&
    (value as { $schema: string }).$schema.includes("vega-lite")
  );
}

export function findCharts(value: unknown, path = "", depth = 0, found: FoundChart[] = []): FoundChart[] {
  if (found.length >= MAX_CHARTS || depth > MAX_DEPTH || !value || typeof value !== "object") return found;
  if (isChartSpec(value)) {
    found.push({ path: path || "(the value)", spec: value });
    return found;
  }
  const entries = Array.isArray(value) ? value.map((v, i) => [String(i), v] as const) : Object.entries(value);
  for (const [key, child] of entries) {
    const childPath = Array.isArray(value) ? `${path}[${key}]` : path ? `${path}.${key}` : key;
    findCharts(child, childPath, depth + 1, found);
    if (found.length >= MAX_CHARTS) break;
  }
  return found;
}
