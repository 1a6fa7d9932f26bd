// One fetch wrapper for the whole editor: every server error arrives as
// {"error": {"code", "message", ...}} and becomes an ApiError the UI can show.

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly detail: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

const TOKEN_KEY = "dagwright.adminToken";

/** Dispatched on window when the editor API refuses for want of the admin token. */
export const ADMIN_TOKEN_EVENT = "dagwright:admin-token";

/** The admin token the editor API needs when the server listens beyond loopback (kept in
 *  this browser's localStorage; empty: none sent). */
export function adminToken(): string {
  try {
    return localStorage.getItem(TOKEN_KEY) ?? "";
  } catch {
    return "";
  }
}

export function setAdminToken(token: string): void {
  try {
    if (token) localStorage.setItem(TOKEN_KEY, token);
    else localStorage.removeItem(TOKEN_KEY);
  } catch {
    // storage disabled: nothing to keep
  }
}

export async function request<T>(method: string, path: string, body?: unknown): Promise<T> {
  let response: Response;
  const headers: Record<string, string> = body === undefined ? {} : { "Content-Type": "application/json" };
  const token = adminToken();
  if (token) headers.Authorization = `Bearer ${token}`;
  try {
    response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (cause) {
    throw new ApiError(0, "network", `The server could not be reached (${String(cause)}).`);
  }
  if (response.status === 204) return undefined as T;
  const text = await response.text();
  let data: unknown = undefined;
  try {
    data = text ? JSON.parse(text) : undefined;
  } catch {
    // Not JSON (a proxy's error page): fall through with the raw text as the message.
  }
  if (!response.ok) {
    const error = (data as { error?: { code?: string; message?: string } } | undefined)?.error;
    if (error?.code === "admin_token_required" || error?.code === "admin_token_invalid") {
      window.dispatchEvent(new Event(ADMIN_TOKEN_EVENT));
    }
    throw new ApiError(
      response.status,
      error?.code ?? `http_${response.status}`,
      error?.message ?? (text.slice(0, 300) || response.statusText),
      (error ?? {}) as Record<string, unknown>,
    );
  }
  return data as T;
}
