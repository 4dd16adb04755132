// Talking to the controller: ETag-aware polling, the bearer token kept in session storage.

const TOKEN_KEY = "gencoach.api-token";
const cache = new Map(); // url -> { etag, data }

export const token = {
  get: () => sessionStorage.getItem(TOKEN_KEY),
  set: (value) => sessionStorage.setItem(TOKEN_KEY, value),
  clear: () => sessionStorage.removeItem(TOKEN_KEY),
};

export class ApiError extends Error {
  constructor(status, detail, body) {
    super(typeof detail === "string" ? detail : JSON.stringify(detail));
    this.status = status;
    this.body = body;
  }
}

function headers(extra = {}) {
  const result = { Accept: "application/json", ...extra };
  const value = token.get();
  if (value) result.Authorization = `Bearer ${value}`;
  return result;
}

export function query(params) {
  const pairs = Object.entries(params).filter(([, v]) => v !== null && v !== undefined && v !== "");
  return new URLSearchParams(pairs).toString();
}

// GET a JSON view; `changed` is false when the server answered 304 (nothing new).
export async function getJSON(url) {
  const cached = cache.get(url);
  const response = await fetch(url, { headers: headers(cached ? { "If-None-Match": cached.etag } : {}) });
  if (response.status === 304 && cached) return { data: cached.data, changed: false };
  const body = await response.json().catch(() => null);
  if (!response.ok) throw new ApiError(response.status, body?.detail ?? response.statusText, body);
  const etag = response.headers.get("ETag");
  if (etag) cache.set(url, { etag, data: body });
  return { data: body, changed: true };
}

// A change through the API's own routes (budgets, interventions).
export async function send(method, url, body) {
  const init = { method, headers: headers(body === undefined ? {} : { "Content-Type": "application/json" }) };
  if (body !== undefined) init.body = JSON.stringify(body);
  const response = await fetch(url, init);
  const data = await response.json().catch(() => null);
  if (!response.ok) throw new ApiError(response.status, data?.detail ?? response.statusText, data);
  return data;
}

// Call `fn` now and every `intervalMs` (a number, or a function giving it) until stopped.
export function poll(fn, every) {
  let stopped = false;
  let timer = null;
  const tick = async () => {
    if (stopped) return;
    try {
      await fn();
    } catch (error) {
      console.error(error);
    }
    const intervalMs = typeof every === "function" ? every() : every;
    if (!stopped) timer = setTimeout(tick, document.hidden ? intervalMs * 4 : intervalMs);
  };
  tick();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}

export const runPath = (runId) => `/v1/runs/${encodeURIComponent(runId)}`;
