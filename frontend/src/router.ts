// Hash routing (#/, #/apps/<slug>, #/apps/<slug>/v/<number>, #/apps/<slug>/triggers, #/waiting, #/tqa, #/tqa/<conversation id>,
// #/evaluations, #/evaluations/<id>, #/interfaces, #/interfaces/<source>, #/examples):
// the server serves index.html at / only, and a reload keeps the route. A leave guard (unsaved
// work) is asked before any in-app navigation, including the browser's back button.

import { useEffect, useState } from "react";

export type Route =
  | { page: "apps" }
  | { page: "editor"; slug: string; version: number | null }
  | { page: "tqa"; conversation: string | null }
  | { page: "evaluations"; evaluation: string | null }
  | { page: "waiting" }
  | { page: "interfaces"; source: string | null }
  | { page: "triggers"; slug: string }
  | { page: "examples" };

export function parseRoute(hash: string): Route {
  const path = hash.replace(/^#/, "");
  const v = /^\/evaluations(?:\/([^/?]+))?\/?$/.exec(path);
  if (v) return { page: "evaluations", evaluation: v[1] ? decodeURIComponent(v[1]) : null };
  const t = /^\/tqa(?:\/([^/?]+))?\/?$/.exec(path);
  if (t) return { page: "tqa", conversation: t[1] ? decodeURIComponent(t[1]) : null };
  if (/^\/waiting\/?$/.test(path)) return { page: "waiting" };
  if (/^\/examples\/?$/.test(path)) return { page: "examples" };
  const i = /^\/interfaces(?:\/([^/?]+))?\/?$/.exec(path);
  if (i) return { page: "interfaces", source: i[1] ? decodeURIComponent(i[1]) : null };
  const g = /^\/apps\/([^/?]+)\/triggers\/?$/.exec(path);
  if (g) return { page: "triggers", slug: decodeURIComponent(g[1]) };
  const m = /^\/apps\/([^/?]+)(?:\/v\/(\d+))?\/?$/.exec(path);
  if (m) return { page: "editor", slug: decodeURIComponent(m[1]), version: m[2] ? Number(m[2]) : null };
  return { page: "apps" };
}

export function routeHash(route: Route): string {
  if (route.page === "apps") return "#/";
  if (route.page === "tqa") return route.conversation ? `#/tqa/${encodeURIComponent(route.conversation)}` : "#/tqa";
  if (route.page === "waiting") return "#/waiting";
  if (route.page === "examples") return "#/examples";
  if (route.page === "interfaces") return route.source ? `#/interfaces/${encodeURIComponent(route.source)}` : "#/interfaces";
  if (route.page === "triggers") return `#/apps/${encodeURIComponent(route.slug)}/triggers`;
  if (route.page === "evaluations") return route.evaluation ? `#/evaluations/${encodeURIComponent(route.evaluation)}` : "#/evaluations";
  return `#/apps/${encodeURIComponent(route.slug)}${route.version ? `/v/${route.version}` : ""}`;
}

type Guard = () => string | null; // a message when leaving would lose work
let guard: Guard | null = null;
let currentHash = typeof window === "undefined" ? "" : window.location.hash;
let suppressNext = false;

export function setLeaveGuard(g: Guard | null): void {
  guard = g;
}

/** What leaving would lose (null: nothing). */
export function leaveMessage(): string | null {
  return guard?.() ?? null;
}

/** Ask the guard; true when leaving is fine. */
export function confirmLeave(): boolean {
  const message = guard?.();
  return !message || window.confirm(message);
}

/** Go to a route, asking first when work would be lost. `replace` leaves no history entry and
 *  skips the guard (the editor changing its own version after a save). */
export function navigate(route: Route | string, opts: { replace?: boolean; force?: boolean } = {}): boolean {
  const hash = typeof route === "string" ? route : routeHash(route);
  if (hash === window.location.hash) return true;
  if (!opts.force && !opts.replace && !confirmLeave()) return false;
  if (opts.replace) {
    history.replaceState(null, "", hash);
    currentHash = hash;
    window.dispatchEvent(new HashChangeEvent("hashchange"));
  } else {
    suppressNext = true;
    window.location.hash = hash;
  }
  return true;
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(window.location.hash));
  useEffect(() => {
    const onChange = () => {
      const hash = window.location.hash;
      if (suppressNext) {
        suppressNext = false;
      } else if (hash !== currentHash && !confirmLeave()) {
        // Back/forward or a typed URL, refused: put the old address back.
        history.replaceState(null, "", currentHash || "#/");
        return;
      }
      currentHash = hash;
      setRoute(parseRoute(hash));
    };
    window.addEventListener("hashchange", onChange);
    return () => window.removeEventListener("hashchange", onChange);
  }, []);
  return route;
}
