// The transport's answers: JSON parsed, a 2xx that is not JSON refused with its own code, and
// a call cancelled by its signal rejected as an abort (not as an unreachable server).
import { afterEach, describe, expect, it, vi } from "vitest";
import { ApiError, request, upload } from "./transport";

afterEach(() => vi.unstubAllGlobals());

describe("the transport", () => {
  it("parses a JSON answer, and an empty 2xx is nothing", async () => {
    vi.stubGlobal("fetch", async () => new Response(JSON.stringify({ variables: ["a"] }), { status: 200 }));
    expect(await request("POST", "/api/v1/template-variables", { template: "{{ a }}" })).toEqual({ variables: ["a"] });
    vi.stubGlobal("fetch", async () => new Response(null, { status: 204 }));
    expect(await request("DELETE", "/api/v1/apps/x/draft")).toBeUndefined();
  });

  it("refuses a 2xx whose body is not JSON as not_json, with the start of the body", async () => {
    const page = "<html>" + "x".repeat(500);
    vi.stubGlobal("fetch", async () => new Response(page, { status: 200, headers: { "Content-Type": "text/html" } }));
    const refusal = await request("GET", "/api/v1/apps").catch((e: unknown) => e);
    expect(refusal).toBeInstanceOf(ApiError);
    expect(refusal).toMatchObject({ status: 200, code: "not_json", message: page.slice(0, 300) });
    const uploaded = await upload("/api/v1/examples", "a,b").catch((e: unknown) => e);
    expect(uploaded).toMatchObject({ code: "not_json" });
  });

  it("hands the signal to fetch: an aborted call rejects as the abort, not as a network error", async () => {
    vi.stubGlobal(
      "fetch",
      (_url: string, init: RequestInit) =>
        new Promise<Response>((_resolve, reject) => {
          init.signal?.addEventListener("abort", () => reject(init.signal?.reason));
        }),
    );
    const controller = new AbortController();
    const call = request("POST", "/api/v1/blocks/x/ports", {}, { signal: controller.signal });
    controller.abort();
    const error = await call.catch((e: unknown) => e);
    expect(error).not.toBeInstanceOf(ApiError);
    expect((error as DOMException).name).toBe("AbortError");
  });

  it("still says the server could not be reached when fetch fails unaborted", async () => {
    vi.stubGlobal("fetch", async () => {
      throw new TypeError("Failed to fetch");
    });
    await expect(request("GET", "/api/v1/apps")).rejects.toMatchObject({ status: 0, code: "network" });
  });
});
