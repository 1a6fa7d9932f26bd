/// <reference types="vitest/config" />
import react from "@vitejs/plugin-react";
import { defineConfig } from "vite";

// The product serves the built editor from frontend/dist at /; `npm run dev` proxies the API
// to a local `dagwright serve` for working on the editor itself.
export default defineConfig({
  plugins: [react()],
  build: { outDir: "dist", sourcemap: true, chunkSizeWarningLimit: 1500 },
  server: {
    proxy: { "/api": "http://127.0.0.1:8000", "/v1": "http://127.0.0.1:8000" },
  },
  test: { environment: "jsdom", include: ["src/**/*.test.{ts,tsx}"] },
});
