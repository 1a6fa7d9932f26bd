import { cleanup, fireEvent, render, screen, waitFor } from "@testing-library/react";
import { useState } from "react";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { JsonSchema } from "../api/types";
import { spec } from "../test/fixtures";
import { SchemaForm } from "./SchemaForm";

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});

/** The form wired to state, as the config panel uses it; `changes` records each onChange. */
function Harness({ schema, initial, secrets = [], changes }: { schema: JsonSchema; initial: Record<string, unknown>; secrets?: string[]; changes: Record<string, unknown>[] }) {
  const [value, setValue] = useState(initial);
  return (
    <SchemaForm
      schema={schema}
      value={value}
      secrets={secrets}
      onChange={(next) => {
        changes.push(next);
        setValue(next);
      }}
    />
  );
}

function setup(block: string, initial: Record<string, unknown> = {}, secrets: string[] = []) {
  const changes: Record<string, unknown>[] = [];
  render(<Harness schema={spec(block).config_schema} initial={initial} secrets={secrets} changes={changes} />);
  return { changes, last: () => changes[changes.length - 1] };
}

const field = (name: string) => screen.getByTestId(`config-${name}`);

describe("SchemaForm", () => {
  it("renders the right control for each kind", () => {
    setup("chat", { prompt: "Hi {{ who }}" });
    expect(field("prompt").tagName).toBe("TEXTAREA");
    expect(field("system").tagName).toBe("TEXTAREA");
    expect(field("stream")).toHaveProperty("type", "checkbox");
    expect(field("temperature").tagName).toBe("INPUT");
    expect(field("stop").tagName).toBe("TEXTAREA");
    cleanup();
    setup("compare");
    expect(field("op").tagName).toBe("SELECT");
    expect((field("op") as HTMLSelectElement).selectedOptions[0].textContent).toBe("=="); // the default
    cleanup();
    setup("http_request", { url: "https://x" });
    expect(field("headers").tagName).toBe("TEXTAREA");
    expect(screen.getByTestId("config-secret_headers")).toBeTruthy();
  });

  it("strings, numbers and booleans go back into the config", () => {
    const { last } = setup("http_request", { url: "" });
    fireEvent.change(field("url"), { target: { value: "https://api/{{ id }}" } });
    expect(last()).toEqual({ url: "https://api/{{ id }}" });
    fireEvent.change(field("timeout"), { target: { value: "12.5" } });
    expect(last()).toMatchObject({ timeout: 12.5 });
    fireEvent.change(field("timeout"), { target: { value: "" } });
    expect(last()).not.toHaveProperty("timeout");
    fireEvent.click(field("fail_on_error_status"));
    expect(last()).toMatchObject({ fail_on_error_status: false });
  });

  it("enum: choosing an option sets it", () => {
    const { last } = setup("compare");
    const select = field("op") as HTMLSelectElement;
    const index = [...select.options].findIndex((o) => o.textContent === "contains");
    fireEvent.change(select, { target: { value: String(index) } });
    expect(last()).toEqual({ op: "contains" });
  });

  it("nullable anyOf: empty unsets, a number is a number", () => {
    const { last } = setup("chat", { prompt: "x" });
    fireEvent.change(field("max_tokens"), { target: { value: "100" } });
    expect(last()).toEqual({ prompt: "x", max_tokens: 100 });
    fireEvent.change(field("max_tokens"), { target: { value: "" } });
    expect(last()).toEqual({ prompt: "x" });
    fireEvent.change(field("provider"), { target: { value: "local" } });
    expect(last()).toEqual({ prompt: "x", provider: "local" });
  });

  it("lists of strings: one per line, typing a new line keeps it", () => {
    const { last } = setup("switch", { cases: ["a"] });
    const area = field("cases") as HTMLTextAreaElement;
    fireEvent.change(area, { target: { value: "a\n" } });
    expect(area.value).toBe("a\n"); // not collapsed while typing
    fireEvent.change(area, { target: { value: "a\nb" } });
    expect(last()).toEqual({ cases: ["a", "b"] });
  });

  it("JSON editor: shows the parse error and keeps the last good value", () => {
    const changes: Record<string, unknown>[] = [];
    render(<Harness schema={spec("http_request").config_schema} initial={{ url: "u", headers: { a: "1" } }} changes={changes} />);
    const area = field("headers") as HTMLTextAreaElement;
    expect(JSON.parse(area.value)).toEqual({ a: "1" });
    fireEvent.change(area, { target: { value: '{"a": ' } });
    expect(screen.getByTestId("config-headers-error").textContent).toMatch(/JSON/);
    expect(changes).toHaveLength(0);
    fireEvent.change(area, { target: { value: '{"a": "2", "b": "3"}' } });
    expect(screen.queryByTestId("config-headers-error")).toBeNull();
    expect(changes[changes.length - 1]).toEqual({ url: "u", headers: { a: "2", b: "3" } });
  });

  it("templates show the ports their variables create", async () => {
    // The server's answers (POST /api/v1/template-variables) for the two templates typed.
    const answers: Record<string, string[]> = { "Answer {{ question }} in {{ lang }}": ["lang", "question"], "{{ only }}": ["only"] };
    vi.stubGlobal("fetch", async (_url: string, init: RequestInit) => {
      const { template } = JSON.parse(String(init.body)) as { template: string };
      return new Response(JSON.stringify({ variables: answers[template] }), { status: 200, headers: { "Content-Type": "application/json" } });
    });
    setup("template", { template: "Answer {{ question }} in {{ lang }}" });
    await waitFor(() => {
      expect(screen.getByTestId("config-template-vars").textContent).toContain("question");
      expect(screen.getByTestId("config-template-vars").textContent).toContain("lang");
    });
    fireEvent.change(field("template"), { target: { value: "{{ only }}" } });
    await waitFor(() => {
      expect(screen.getByTestId("config-template-vars").textContent).toContain("only");
      expect(screen.getByTestId("config-template-vars").textContent).not.toContain("lang");
    });
  });

  it("secret fields offer secret NAMES only, never an input for a value", () => {
    const { last } = setup("invoke_remote", { app: "a", url: "https://x" }, ["github_token", "remote_key"]);
    const select = field("api_key_secret") as HTMLSelectElement;
    expect(select.tagName).toBe("SELECT");
    expect([...select.options].map((o) => o.value)).toEqual(["", "github_token", "remote_key"]);
    fireEvent.change(select, { target: { value: "remote_key" } });
    expect(last()).toMatchObject({ api_key_secret: "remote_key" });
    // No password or free-text input exists for the secret.
    expect(document.querySelectorAll("input[type=password]")).toHaveLength(0);
  });

  it("secret headers: header name -> secret name, picked from the list", () => {
    const { last } = setup("http_request", { url: "u", secret_headers: { Authorization: "github_token" } }, ["github_token", "other"]);
    const key = screen.getByTestId("config-secret_headers-key-0") as HTMLInputElement;
    const secret = screen.getByTestId("config-secret_headers-secret-0") as HTMLSelectElement;
    expect(key.value).toBe("Authorization");
    expect(secret.value).toBe("github_token");
    expect(secret.tagName).toBe("SELECT");
    fireEvent.change(secret, { target: { value: "other" } });
    expect(last()).toMatchObject({ secret_headers: { Authorization: "other" } });
    fireEvent.click(screen.getByTestId("config-secret_headers-add"));
    fireEvent.change(screen.getByTestId("config-secret_headers-key-1"), { target: { value: "X-Key" } });
    fireEvent.change(screen.getByTestId("config-secret_headers-secret-1"), { target: { value: "github_token" } });
    expect(last()).toMatchObject({ secret_headers: { Authorization: "other", "X-Key": "github_token" } });
  });

  it("a secret the store lacks still shows, marked", () => {
    setup("invoke_remote", { app: "a", url: "u", api_key_secret: "gone" }, ["present"]);
    const select = field("api_key_secret") as HTMLSelectElement;
    expect(select.value).toBe("gone");
    expect(select.selectedOptions[0].textContent).toMatch(/not in the secret store/);
  });

  it("shows a field's server-side error by the field", () => {
    render(<SchemaForm schema={spec("template").config_schema} value={{ template: "{{" }} secrets={[]} onChange={() => undefined} fieldErrors={{ template: "template does not parse" }} />);
    expect(screen.getByRole("alert").textContent).toBe("template does not parse");
  });
});
