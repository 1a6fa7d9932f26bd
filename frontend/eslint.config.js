// ESLint for the editor: typescript-eslint's recommended rules and React's rules of hooks
// (eslint-plugin-react-hooks, with its React Compiler checks). `npm run lint` must be clean:
// `make test` runs it.

import js from "@eslint/js";
import reactHooks from "eslint-plugin-react-hooks";
import globals from "globals";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["dist", "node_modules", "src/api/schema.d.ts"] },
  {
    files: ["**/*.{ts,tsx}"],
    extends: [js.configs.recommended, ...tseslint.configs.recommended, reactHooks.configs.flat["recommended-latest"]],
    languageOptions: { ecmaVersion: 2022, globals: globals.browser },
    rules: {
      "react-hooks/exhaustive-deps": "error",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
    },
  },
  { files: ["scripts/**/*.mjs"], extends: [js.configs.recommended], languageOptions: { globals: globals.node } },
);
