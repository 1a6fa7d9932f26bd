import { describe, expect, it } from "vitest";
import { parseRoute, routeHash } from "../router";
import { fieldValue } from "./api";

describe("integration routes", () => {
  it("parses and writes the waiting list and an app's triggers", () => {
    expect(parseRoute("#/waiting")).toEqual({ page: "waiting" });
    expect(parseRoute("#/apps/my%20app/triggers")).toEqual({ page: "triggers", slug: "my app" });
    expect(routeHash({ page: "triggers", slug: "my app" })).toBe("#/apps/my%20app/triggers");
    expect(routeHash({ page: "waiting" })).toBe("#/waiting");
    // The editor's own routes are unchanged.
    expect(parseRoute("#/apps/x/v/3")).toEqual({ page: "editor", slug: "x", version: 3 });
  });
});

describe("fieldValue", () => {
  it("gives numbers and booleans their type, leaving text the server will refuse as is", () => {
    expect(fieldValue("integer", "4")).toBe(4);
    expect(fieldValue("number", "4.5")).toBe(4.5);
    expect(fieldValue("integer", "many")).toBe("many");
    expect(fieldValue("boolean", "true")).toBe(true);
    expect(fieldValue("text", "4")).toBe("4");
  });
});
