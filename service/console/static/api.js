// The HTTP API of the service that serves the console (same origin only), with the tab's token.

const TOKEN_KEY = "gangplank.token";

export const auth = {
  // "bearer" when the service has tokens configured (the shell says so), "none" otherwise
  mode: document.querySelector('meta[name="gangplank-auth"]')?.content || "none",
  get token() {
    try { return sessionStorage.getItem(TOKEN_KEY) || ""; } catch { return ""; }
  },
  set token(value) {
    try {
      if (value) sessionStorage.setItem(TOKEN_KEY, value);
      else sessionStorage.removeItem(TOKEN_KEY);
    } catch { /* storage refused: the token lives for this page only */ }
  },
};

export class ApiError extends Error {
  constructor(status, problem, path) {
    super((problem && (problem.detail || problem.title)) || `HTTP ${status}`);
    this.status = status;
    this.problem = problem || {};
    this.path = path;
  }
}

export class NeedToken extends Error {
  constructor() { super("a token is needed"); }
}

// GET a path of the API as JSON. A 401/403 raises ApiError (the page shows it with the token field).
export async function get(path, { signal } = {}) {
  if (!path.startsWith("/")) throw new Error(`not a path of this service: ${path}`);
  if (auth.mode === "bearer" && !auth.token) throw new NeedToken();
  const headers = { Accept: "application/json" };
  if (auth.token) headers.Authorization = `Bearer ${auth.token}`;
  let answer;
  try {
    answer = await fetch(path, { headers, signal, credentials: "omit", cache: "no-store" });
  } catch (err) {
    if (err.name === "AbortError") throw err;
    throw new ApiError(0, { detail: "the service did not answer (is it running?)" }, path);
  }
  let body = null;
  try { body = await answer.json(); } catch { body = null; }
  if (!answer.ok) throw new ApiError(answer.status, body, path);
  return body;
}
