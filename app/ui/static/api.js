// The API as any client uses it: the person's key from this browser's storage, JSON in, JSON or
// Server-Sent Events out, and every failure as an ApiError carrying the server's error body.

const KEY_ITEM = "ragtime.api-key";

export const apiKey = {
  get: () => localStorage.getItem(KEY_ITEM) || "",
  set: (value) => localStorage.setItem(KEY_ITEM, value),
  forget: () => localStorage.removeItem(KEY_ITEM),
};

/** A response that was not a success, or a stream that ended in an `error` event. */
export class ApiError extends Error {
  constructor(status, type, message, retryAfterS = null) {
    super(message);
    this.status = status;
    this.type = type;
    this.retryAfterS = retryAfterS;
  }
}

async function failure(response) {
  const retry = Number(response.headers.get("Retry-After"));
  let type = "error";
  let message = `${response.status} ${response.statusText}`;
  try {
    const body = await response.json();
    if (body && body.error) {
      type = body.error.type || body.error.code || type;
      message = body.error.message || message;
    } else if (body && body.detail) {
      message = typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail);
    }
  } catch {
    // not JSON: the status line says what there is to say
  }
  return new ApiError(response.status, type, message, Number.isFinite(retry) && retry > 0 ? retry : null);
}

/** Send a request to this server; resolve to the response, or throw an ApiError. */
export async function call(path, { method = "GET", body, signal, headers = {} } = {}) {
  const sent = { ...headers };
  const key = apiKey.get();
  if (key) sent.Authorization = `Bearer ${key}`;
  if (body !== undefined) sent["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(path, {
      method,
      headers: sent,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
    });
  } catch (error) {
    if (error.name === "AbortError") throw error;
    throw new ApiError(0, "unreachable", "the server could not be reached");
  }
  if (!response.ok) throw await failure(response);
  return response;
}

export async function getJson(path, options) {
  return (await call(path, options)).json();
}

/** The events of a Server-Sent Events response, each as {event, data} with data parsed as JSON.
 * Lines may end in CRLF, LF or CR (sse-starlette sends CRLF); comment lines (pings) are skipped. */
export async function* events(response) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    // A CR at the very end may be the first half of a CRLF: keep it for the next chunk.
    const whole = buffer.endsWith("\r") ? buffer.slice(0, -1) : buffer;
    const kept = buffer.slice(whole.length);
    const blocks = whole.replace(/\r\n?/g, "\n").split("\n\n");
    buffer = blocks.pop() + kept;
    for (const block of blocks) {
      const parsed = parseBlock(block);
      if (parsed) yield parsed;
    }
  }
}

function parseBlock(block) {
  let event = "message";
  const data = [];
  for (const line of block.split("\n")) {
    if (line === "" || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "event") event = value;
    else if (field === "data") data.push(value);
  }
  if (data.length === 0) return null;
  return { event, data: JSON.parse(data.join("\n")) };
}
