// @vitest-environment node
// The committed API types are what `npm run api:types` makes of the committed OpenAPI
// document (tests/api/test_openapi_document.py checks that document against the server).

import { describe, expect, it } from "vitest";
import { apiTypes } from "../../scripts/apiTypes.mjs";
import openapiText from "./openapi.json?raw";
import schemaText from "./schema.d.ts?raw";

describe("the generated API types", () => {
  it("are up to date with src/api/openapi.json (else run `npm run api:types`)", async () => {
    expect(schemaText).toBe(await apiTypes(JSON.parse(openapiText)));
  });
});
