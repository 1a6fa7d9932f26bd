import { act, cleanup, render, screen } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ApiError } from "../api/transport";
import { ErrorBoundary } from "./ErrorBoundary";
import { Toaster, describeError, toastError } from "./toast";

afterEach(cleanup);

function Boom(): never {
  throw new Error("kaput");
}

describe("bad input never blanks the screen", () => {
  it("an error boundary shows what failed", () => {
    vi.spyOn(console, "error").mockImplementation(() => undefined);
    render(
      <ErrorBoundary area="canvas">
        <Boom />
      </ErrorBoundary>,
    );
    expect(screen.getByTestId("error-boundary").textContent).toContain("kaput");
    expect(screen.getByText("The canvas failed")).toBeTruthy();
  });

  it("a server error becomes a toast with its code and message", () => {
    render(<Toaster />);
    act(() => toastError(new ApiError(409, "slug_taken", "the slug 'hello' is taken"), "Could not create the app"));
    const t = screen.getByTestId("toast-error");
    expect(t.textContent).toContain("Could not create the app");
    expect(t.textContent).toContain("slug_taken");
    expect(t.textContent).toContain("the slug 'hello' is taken");
    expect(describeError(new Error("x"))).toEqual({ code: "Error", message: "x" });
  });
});
