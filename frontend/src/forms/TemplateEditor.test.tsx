import { fireEvent, render, screen } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import type { JsonSchema } from "../api/types";
import { SchemaForm } from "./SchemaForm";
import { TemplateEditor } from "./TemplateEditor";

describe("TemplateEditor", () => {
  it("marks variables and tags in the painted copy of the text", () => {
    const { container } = render(<TemplateEditor value={"Hi {{ name }}{% if x %}!{% endif %}"} onChange={() => {}} data-testid="t" />);
    expect([...container.querySelectorAll(".tpl-var")].map((m) => m.textContent)).toEqual(["{{ name }}"]);
    expect(container.querySelectorAll(".tpl-tag")).toHaveLength(2);
    expect((screen.getByTestId("t") as HTMLTextAreaElement).value).toBe("Hi {{ name }}{% if x %}!{% endif %}");
  });
});

describe("SchemaForm fold", () => {
  const schema = {
    type: "object",
    properties: {
      temperature: { type: "number" },
      prompt: { type: "string", format: "jinja2" },
      seed: { type: "integer" },
    },
    required: ["prompt"],
  } as unknown as JsonSchema;

  it("shows the kept fields first and folds the rest under Advanced, opened on an error", () => {
    const { container, rerender } = render(<SchemaForm schema={schema} value={{}} onChange={() => {}} secrets={[]} fold={{ keep: ["prompt"], extra: <p>picker</p> }} />);
    const form = container.querySelector(".schema-form")!;
    expect(form.firstElementChild!.querySelector("[data-testid=config-prompt]")).not.toBeNull();
    const advanced = screen.getByTestId("config-advanced") as HTMLDetailsElement;
    expect(advanced.open).toBe(false);
    expect(advanced.querySelector("[data-testid=config-temperature]")).not.toBeNull();
    fireEvent.click(advanced.querySelector("summary")!);
    rerender(<SchemaForm schema={schema} value={{}} onChange={() => {}} secrets={[]} fieldErrors={{ seed: "bad" }} fold={{ keep: ["prompt"] }} />);
    expect((screen.getByTestId("config-advanced") as HTMLDetailsElement).open).toBe(true);
  });
});
