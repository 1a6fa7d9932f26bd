import { cleanup, render, screen, waitFor } from "@testing-library/react";
import { afterEach, describe, expect, it } from "vitest";
import { ChartsOf } from "./ChartView";
import { findCharts, isChartSpec } from "./charts";

afterEach(cleanup);

// A chart value as dagwright/charts.py makes it (Data-Copilot's answer nests them in `charts`).
const line = {
  $schema: "https://vega.github.io/schema/vega-lite/v6.json",
  data: { values: [{ day: "2024-01-01", cost: 10.5 }, { day: "2024-01-02", cost: 12 }] },
  mark: { type: "line", tooltip: true },
  encoding: { x: { field: "day", type: "temporal" }, y: { field: "cost", type: "quantitative" } },
  title: "Daily cost",
};

describe("chart values", () => {
  it("are told from other objects by their Vega-Lite schema", () => {
    expect(isChartSpec(line)).toBe(true);
    expect(isChartSpec({ $schema: "https://json-schema.org/draft/2020-12/schema" })).toBe(false);
    expect(isChartSpec([line])).toBe(false);
  });

  it("are found at any depth, each with its path", () => {
    const answer = { answer: { tables: { result1: [{ day: "2024-01-01" }] }, charts: [line, line] } };
    expect(findCharts(answer).map((c) => c.path)).toEqual(["answer.charts[0]", "answer.charts[1]"]);
    expect(findCharts({ text: "no chart" })).toEqual([]);
  });

  it("are drawn as SVG by vega-embed", async () => {
    render(<ChartsOf value={{ chart: line }} />);
    expect(screen.getByText("chart")).toBeTruthy();
    const chart = screen.getByTestId("chart");
    await waitFor(() => expect(chart.querySelector("svg")).not.toBeNull(), { timeout: 10000 });
    expect(chart.textContent).toContain("Daily cost");
  });

  it("draw nothing for a value without charts", () => {
    const { container } = render(<ChartsOf value={{ a: 1 }} />);
    expect(container.innerHTML).toBe("");
  });
});

describe("charts in the views", () => {
  it("an AutoTQA answer that carries a chart shows it", async () => {
    const { AnswerPanel } = await import("../tqa/ConversationView");
    const answer = {
      form: "value",
      value: { total: 22.5, chart: line },
      text: "22.5",
      table: null,
      fields: null,
      grounded: true,
      evidence: [],
    };
    render(<AnswerPanel answer={answer} scripted={false} />);
    const charts = screen.getByTestId("tqa-answer-charts");
    expect(charts.textContent).toContain("value.chart");
    await waitFor(() => expect(charts.querySelector("svg")).not.toBeNull(), { timeout: 10000 });
  });
});
