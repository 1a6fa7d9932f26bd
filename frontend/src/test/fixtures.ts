// The block registry as the server exports it (a subset of GET /api/v1/blocks, captured from
// `dagwright serve`), for tests of ports, forms and connections.

import blocksText from "./blocks.fixture.json?raw";
import type { BlockSpec, BlocksResponse } from "../api/types";

export const blocksResponse = JSON.parse(blocksText) as BlocksResponse;
export const blocks: ReadonlyMap<string, BlockSpec> = new Map(blocksResponse.blocks.map((b) => [b.name, b]));

export function spec(name: string): BlockSpec {
  const found = blocks.get(name);
  if (!found) throw new Error(`no block ${name} in the fixture`);
  return found;
}

/** In-memory Storage for draft tests. */
export class MemoryStorage implements Storage {
  private data = new Map<string, string>();
  get length() {
    return this.data.size;
  }
  clear() {
    this.data.clear();
  }
  getItem(key: string) {
    return this.data.has(key) ? this.data.get(key)! : null;
  }
  key(index: number) {
    return [...this.data.keys()][index] ?? null;
  }
  removeItem(key: string) {
    this.data.delete(key);
  }
  setItem(key: string, value: string) {
    this.data.set(key, String(value));
  }
}
