// Regenerates the API's TypeScript types from the server: dumps the OpenAPI document the
// backend builds (FastAPI's, from its routes and models) to src/api/openapi.json, then writes
// src/api/schema.d.ts from it with openapi-typescript. Run after changing a route or a model:
//   npm run api:types
// tests/api/test_openapi_document.py checks openapi.json against the backend, and
// src/api/schema.test.ts checks schema.d.ts against openapi.json.

import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { apiTypes } from "./apiTypes.mjs";

const here = (path) => fileURLToPath(new URL(path, import.meta.url));
const python = process.env.PYTHON ?? here("../../.venv/bin/python");
const spec = execFileSync(python, [here("dump_openapi.py")], { encoding: "utf8", maxBuffer: 64 * 1024 * 1024 });
writeFileSync(here("../src/api/openapi.json"), spec);
writeFileSync(here("../src/api/schema.d.ts"), await apiTypes(JSON.parse(spec)));
console.log("wrote src/api/openapi.json and src/api/schema.d.ts");
