import type { components } from "./generated/wire.js";

/** One of the contract's error codes (ErrorCode in openapi/wire.yaml). */
export type ErrorCode = components["schemas"]["ErrorCode"];

/**
 * A failed call. code and message come from the daemon's
 * `{"error":{"code","message"}}` body; a failure without one (no daemon on
 * the port, a proxy's HTML page, a reset connection) still gets a code,
 * from its HTTP status, or `unavailable` when there was no answer at all
 * (status 0) and `canceled` when the caller's signal aborted the call.
 */
export class ControlPlaneError extends Error {
  /** The contract's error code. */
  readonly code: ErrorCode;
  /** The HTTP status, or 0 when no answer came. */
  readonly status: number;

  constructor(code: ErrorCode, message: string, status: number, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "ControlPlaneError";
    this.code = code;
    this.status = status;
  }
}

const codes: readonly ErrorCode[] = [
  "not_found",
  "already_exists",
  "invalid_argument",
  "failed_precondition",
  "preflight_failed",
  "create_failed",
  "unsupported",
  "unavailable",
  "unauthenticated",
  "permission_denied",
  "resource_exhausted",
  "internal",
  "canceled",
  "deadline_exceeded",
];

/** isErrorCode reports whether s is one of the contract's codes. */
export function isErrorCode(s: unknown): s is ErrorCode {
  return typeof s === "string" && (codes as readonly string[]).includes(s);
}

/** The code an HTTP status stands for when the body carries none. */
export function codeForStatus(status: number): ErrorCode {
  switch (status) {
    case 400:
    case 413:
      return "invalid_argument";
    case 401:
      return "unauthenticated";
    case 403:
      return "permission_denied";
    case 404:
      return "not_found";
    case 409:
      return "failed_precondition";
    case 422:
      return "preflight_failed";
    case 429:
      return "resource_exhausted";
    case 499:
      return "canceled";
    case 501:
      return "unsupported";
    case 504:
      return "deadline_exceeded";
    case 500:
      return "internal";
    default:
      return status >= 500 || status === 0 ? "unavailable" : "internal";
  }
}

/** The error a failed answer stands for; body is what openapi-fetch parsed. */
export function errorFromResponse(response: Response, body: unknown): ControlPlaneError {
  const inner = (body as { error?: { code?: unknown; message?: unknown } } | undefined)?.error;
  if (inner && isErrorCode(inner.code)) {
    return new ControlPlaneError(inner.code, typeof inner.message === "string" ? inner.message : inner.code, response.status);
  }
  const text = typeof body === "string" ? body.trim().slice(0, 200) : "";
  return new ControlPlaneError(
    codeForStatus(response.status),
    `HTTP ${response.status}${response.statusText ? " " + response.statusText : ""}${text ? ": " + text : ""}`,
    response.status,
  );
}

/** The error a fetch that threw stands for. */
export function errorFromThrown(err: unknown, signal?: AbortSignal | null): ControlPlaneError {
  if (err instanceof ControlPlaneError) {
    return err;
  }
  if (signal?.aborted || (err instanceof Error && err.name === "AbortError")) {
    return new ControlPlaneError("canceled", "the call was aborted", 0, { cause: err });
  }
  const detail = err instanceof Error ? err.message : String(err);
  return new ControlPlaneError("unavailable", `no answer from the sandplane daemon: ${detail}`, 0, { cause: err });
}
