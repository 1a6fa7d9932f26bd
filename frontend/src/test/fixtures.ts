// The block registry and the port type matrix as the server exports them (a subset of GET
// /api/v1/blocks, and GET /api/v1/types, captured from `dagwright serve`), for tests of ports,
// forms and connections.

import blocksText from "./blocks.fixture.json?raw";
import typesText from "./types.fixture.json?raw";
import type { BlockSpec, BlocksResponse, TypesResponse } from "../api/types";

export const blocksResponse = JSON.parse(blocksText) as BlocksResponse;
/** GET /api/v1/types of the same server: which port types may feed which. */
export const typesResponse = JSON.parse(typesText) as TypesResponse;
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
