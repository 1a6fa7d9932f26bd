import { describe, expect, it } from "vitest";
import { typeColour } from "./portColour";

describe("port colours", () => {
  it("colours a port by its type's family", () => {
    expect(typeColour("int")).toBe(typeColour("float"));
    expect(typeColour("list[str]")).toBe(typeColour("list[Any]"));
    expect(typeColour("str")).not.toBe(typeColour("list[str]"));
    expect(typeColour("str | None")).toBe(typeColour("str"));
    expect(typeColour("MyModel")).toMatch(/^hsl/);
  });
});
