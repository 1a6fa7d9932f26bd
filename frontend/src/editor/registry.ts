// The block registry, the type-compatibility matrix and the secret names, loaded once per
// page and shared by every editor view.

import { useCallback, useEffect, useState } from "react";
import { api } from "../api/client";
import { ApiError } from "../api/transport";
import type { BlockSpec, TypesResponse } from "../api/types";
import type { BlockMap } from "./graph";

export interface Registry {
  categories: string[];
  blocks: BlockSpec[];
  byName: BlockMap;
  /** The server's port type matrix (GET /api/v1/types), the only judge of a wire while it
   *  is dragged: without it every wire would be accepted unchecked, so a registry that could
   *  not load it is not loaded at all (the editor says so and offers to try again). */
  compatibility: TypesResponse["compatibility"];
  secrets: string[];
}

let cached: Promise<Registry> | null = null;

async function loadRegistry(): Promise<Registry> {
  const [blocks, types, secrets] = await Promise.all([
    api.blocks(),
    api.types().catch((e: unknown) => {
      if (!(e instanceof ApiError)) throw e;
      throw new ApiError(e.status, e.code, `The port type matrix (GET /api/v1/types) could not be loaded, so no wire could be checked: ${e.message}`, e.detail);
    }),
    api.secrets().catch(() => ({ names: [] as string[] })),
  ]);
  return {
    categories: blocks.categories,
    blocks: blocks.blocks,
    byName: new Map(blocks.blocks.map((b) => [b.name, b])),
    compatibility: types.compatibility,
    secrets: [...(secrets.names ?? [])].sort(),
  };
}

export function useRegistry(): { registry: Registry | null; error: unknown; reload: () => void; refreshSecrets: () => void } {
  const [registry, setRegistry] = useState<Registry | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [attempt, setAttempt] = useState(0);
  useEffect(() => {
    let live = true;
    if (!cached) cached = loadRegistry();
    cached.then(
      (r) => live && setRegistry(r),
      (e: unknown) => {
        cached = null; // try again next time
        if (live) setError(e);
      },
    );
    return () => {
      live = false;
    };
  }, [attempt]);
  const reload = useCallback(() => {
    cached = null;
    setError(null);
    setAttempt((a) => a + 1);
  }, []);
  const refreshSecrets = useCallback(() => {
    api.secrets().then(
      (s) => setRegistry((r) => (r ? { ...r, secrets: [...(s.names ?? [])].sort() } : r)),
      () => undefined,
    );
  }, []);
  return { registry, error, reload, refreshSecrets };
}
