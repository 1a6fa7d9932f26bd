// The editor's registry without the server's type matrix is refused, not loaded with every
// wire accepted unchecked; trying again loads it once the matrix answers.
import { act, cleanup, renderHook, waitFor } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { blocksResponse, typesResponse } from "../test/fixtures";
import { ApiError } from "../api/transport";
import { useRegistry } from "./registry";

function server(typesStatus: () => number) {
  vi.stubGlobal("fetch", async (url: string) => {
    if (url === "/api/v1/blocks") return new Response(JSON.stringify(blocksResponse), { status: 200 });
    if (url === "/api/v1/secrets") return new Response(JSON.stringify({ names: ["B", "A"] }), { status: 200 });
    if (url === "/api/v1/types") {
      const status = typesStatus();
      return status === 200
        ? new Response(JSON.stringify(typesResponse), { status })
        : new Response(JSON.stringify({ error: { code: "not_found", message: "Not Found" } }), { status });
    }
    throw new Error(`unexpected ${url}`);
  });
}

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});

describe("useRegistry", () => {
  it("refuses to load without the type matrix, naming it, and loads on a retry once it answers", async () => {
    let status = 404;
    server(() => status);
    const { result } = renderHook(() => useRegistry());
    await waitFor(() => expect(result.current.error).not.toBeNull());
    expect(result.current.registry).toBeNull();
    expect(result.current.error).toBeInstanceOf(ApiError);
    expect((result.current.error as ApiError).message).toMatch(/port type matrix \(GET \/api\/v1\/types\) could not be loaded/);

    status = 200;
    act(() => result.current.reload());
    await waitFor(() => expect(result.current.registry).not.toBeNull());
    expect(result.current.registry?.compatibility).toEqual(typesResponse.compatibility);
    expect(result.current.registry?.secrets).toEqual(["A", "B"]);
  });
});
