// The editor's calls to the API, typed (docs/api.md).

import { type RequestOptions, request } from "./transport";
import type {
  AppExport,
  AppOut,
  AppUpdate,
  BlockPorts,
  NodesPorts,
  BlocksResponse,
  FlowDocument,
  KeyCreated,
  KeyOut,
  Page,
  SecretsResponse,
  TypesResponse,
  TemplateVariablesOut,
  ValidationResult,
  VersionCreate,
  VersionDetail,
  VersionDiff,
  VersionOut,
} from "./types";

const e = encodeURIComponent;
const V1 = "/api/v1";

export const api = {
  listApps: (offset = 0, limit = 200) => request<Page<AppOut>>("GET", `${V1}/apps?offset=${offset}&limit=${limit}`),
  createApp: (slug: string, name: string, description = "") =>
    request<AppOut>("POST", `${V1}/apps`, { slug, name, description }),
  getApp: (app: string) => request<AppOut>("GET", `${V1}/apps/${e(app)}`),
  updateApp: (app: string, changes: AppUpdate) =>
    request<AppOut>("PATCH", `${V1}/apps/${e(app)}`, changes),
  deleteApp: (app: string) => request<void>("DELETE", `${V1}/apps/${e(app)}`),

  listVersions: (app: string, offset = 0, limit = 50) =>
    request<Page<VersionOut>>("GET", `${V1}/apps/${e(app)}/versions?offset=${offset}&limit=${limit}`),
  getVersion: (app: string, version: string | number) =>
    request<VersionDetail>("GET", `${V1}/apps/${e(app)}/versions/${e(String(version))}`),
  createVersion: (app: string, body: VersionCreate) =>
    request<VersionOut>("POST", `${V1}/apps/${e(app)}/versions`, body),
  diff: (app: string, a: string | number, b: string | number) =>
    request<VersionDiff>("GET", `${V1}/apps/${e(app)}/diff?a=${e(String(a))}&b=${e(String(b))}`),
  publish: (app: string, versionId: string) =>
    request<AppOut>("POST", `${V1}/apps/${e(app)}/publish`, { version_id: versionId }),
  exportApp: (app: string) => request<AppExport>("GET", `${V1}/apps/${e(app)}/export`),
  importApp: (document: unknown, slug?: string) =>
    request<AppOut>("POST", `${V1}/apps/import${slug ? `?slug=${e(slug)}` : ""}`, document),

  validate: (flow: FlowDocument) => request<ValidationResult>("POST", `${V1}/validate`, { flow }),
  blocks: () => request<BlocksResponse>("GET", `${V1}/blocks`),
  ports: (block: string, config: Record<string, unknown>, options?: RequestOptions) =>
    request<BlockPorts>("POST", `${V1}/blocks/${e(block)}/ports`, config, options),
  /** Several nodes' ports in one call (node id -> block and config): what a flow opening asks. */
  nodesPorts: (nodes: Record<string, { block: string; config: Record<string, unknown> }>, options?: RequestOptions) =>
    request<NodesPorts>("POST", `${V1}/blocks/ports`, { nodes }, options),
  types: () => request<TypesResponse>("GET", `${V1}/types`),
  templateVariables: (template: string, options?: RequestOptions) =>
    request<TemplateVariablesOut>("POST", `${V1}/template-variables`, { template }, options).then((r) => r.variables),
  secrets: () => request<SecretsResponse>("GET", `${V1}/secrets`),

  listKeys: (app: string) => request<KeyOut[]>("GET", `${V1}/apps/${e(app)}/keys`),
  createKey: (app: string, name: string) => request<KeyCreated>("POST", `${V1}/apps/${e(app)}/keys`, { name }),
  deleteKey: (app: string, id: string) => request<void>("DELETE", `${V1}/apps/${e(app)}/keys/${e(id)}`),
};
