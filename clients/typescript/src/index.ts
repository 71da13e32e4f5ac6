/**
 * @sandplane/client: the TypeScript client of the sandplane local control
 * plane (`sandplane serve`, http://127.0.0.1:4025/v1 by default). Its types
 * are generated from openapi/controlplane.yaml (src/generated); this file is
 * the hand-written surface over openapi-fetch. It uses only fetch, streams
 * and AbortSignal, so it runs in Node 18+ and in browsers alike.
 */
import createClient, { type Client } from "openapi-fetch";

import { ControlPlaneError, errorFromResponse, errorFromThrown } from "./errors.js";
import type { paths } from "./generated/schema.js";
import type { components } from "./generated/wire.js";
import { apiVersion, contractVersion } from "./generated/version.js";
import { Refresher, type RefresherOptions } from "./refresher.js";
import { parseSSE } from "./sse.js";

export { ControlPlaneError, codeForStatus, isErrorCode, type ErrorCode } from "./errors.js";
export { Refresher, type RefresherOptions } from "./refresher.js";
export { parseSSE, type SSEMessage } from "./sse.js";
export type { operations, paths } from "./generated/schema.js";
export type { components } from "./generated/wire.js";
export { apiVersion, contractVersion };

type Schemas = components["schemas"];
export type Info = Schemas["Info"];
export type Sandbox = Schemas["SandboxInfo"];
export type SandboxState = Schemas["SandboxState"];
export type Runtime = Schemas["Runtime"];
export type CreateSandboxRequest = Schemas["CreateSandboxRequest"];
export type ResizeRequest = Schemas["ResizeRequest"];
export type PreviewUrl = Schemas["PreviewUrl"];
export type EntrypointLogs = Schemas["EntrypointLogs"];
export type Event = Schemas["Event"];
export type EventType = Schemas["EventType"];

/** Where the daemon listens unless told otherwise. */
export const DEFAULT_BASE_URL = "http://127.0.0.1:4025/v1";

/** Options of a ControlPlaneClient. */
export interface ControlPlaneClientOptions {
  /** The daemon's /v1 URL; DEFAULT_BASE_URL when absent. */
  baseUrl?: string;
  /** The daemon's bearer token (`sandplane serve --token-file`), if it has one. */
  token?: string;
  /** The fetch to call; globalThis.fetch when absent. */
  fetch?: typeof fetch;
  /**
   * Told once when the daemon serves another apiVersion than the one this
   * client was generated for; console.warn when absent.
   */
  onWarning?: (message: string) => void;
  /**
   * Whether the first call also asks /v1/info for the daemon's apiVersion,
   * in the background (its failures are ignored). true by default;
   * checkVersion() and info() check in any case.
   */
  checkVersion?: boolean;
}

/** What every call takes besides its own arguments. */
export interface CallOptions {
  /** Aborts the call; it then fails with code `canceled`. */
  signal?: AbortSignal;
}

/** Which sandboxes a list or an event stream is about. */
export interface Filter {
  /** Only sandboxes with all these labels. */
  labels?: Record<string, string>;
  /** Only the sandboxes of this agent session. */
  sessionId?: string;
}

/** Options of ControlPlaneClient.events: events (and a snapshot) of the sandboxes the filter picks. */
export interface EventsOptions extends Filter {
  /** Ends the iteration, cleanly, when it fires. */
  signal?: AbortSignal;
  /** Resume after this event id (an Event's seq) instead of starting with a snapshot. */
  lastEventId?: string | number;
  /** The first wait before reconnecting a dropped stream, in ms (100). */
  minBackoffMs?: number;
  /** The longest wait between reconnects, in ms (5000). */
  maxBackoffMs?: number;
  /** Called with each failure that led to a reconnect (not thrown). */
  onReconnect?: (err: unknown, attempt: number) => void;
}

/** The result of checkVersion. */
export interface VersionCheck {
  /** Whether the daemon serves the apiVersion this client was generated for. */
  ok: boolean;
  /** The daemon's apiVersion. */
  server: string;
  /** The apiVersion this client was generated for. */
  client: string;
}

/** Codes on which reconnecting the event stream cannot help. */
const fatalStreamCodes = new Set(["unauthenticated", "permission_denied", "invalid_argument", "not_found", "unsupported"]);

/** The query string of a filter: label.KEY=VALUE pairs and sessionId. */
function filterQuery(f: Filter): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(f.labels ?? {})) {
    q.append("label." + k, v);
  }
  if (f.sessionId !== undefined) {
    q.append("sessionId", f.sessionId);
  }
  return q.toString();
}

/**
 * A client of the local control plane. Every method throws a
 * ControlPlaneError when the call fails.
 *
 *     const cp = new ControlPlaneClient({ token: process.env.SANDPLANE_TOKEN });
 *     const sb = await cp.create({ labels: { app: "demo" } });
 */
export class ControlPlaneClient {
  /** The daemon's /v1 URL, without a trailing slash. */
  readonly baseUrl: string;
  readonly #api: Client<paths>;
  readonly #fetch: typeof fetch;
  readonly #headers: Record<string, string>;
  readonly #onWarning: (message: string) => void;
  #warned = false;
  #versionChecked: boolean;

  constructor(opts: ControlPlaneClientOptions = {}) {
    this.baseUrl = (opts.baseUrl ?? DEFAULT_BASE_URL).replace(/\/+$/, "");
    // Never called as a method: a browser's fetch throws "Illegal
    // invocation" when its this is anything but the window. The global one
    // is looked up at call time, so that a fetch patched after construction
    // (or installed by a polyfill) is the one used.
    const given = opts.fetch;
    this.#fetch = given ? (input, init) => given(input, init) : (input, init) => globalThis.fetch(input, init);
    this.#headers = opts.token ? { Authorization: `Bearer ${opts.token}` } : {};
    this.#onWarning = opts.onWarning ?? ((m) => console.warn(m));
    this.#versionChecked = opts.checkVersion === false;
    const f = this.#fetch;
    this.#api = createClient<paths>({
      baseUrl: this.baseUrl,
      headers: this.#headers,
      fetch: (req: Request) => f(req),
    });
  }

  /** The daemon's identity; complete only with the token (or when it has none). */
  async info(opts: CallOptions = {}): Promise<Info> {
    this.#versionChecked = true;
    const info = await this.#call(() => this.#api.GET("/info", { signal: opts.signal }), opts.signal);
    this.#compare(info.apiVersion);
    return info;
  }

  /**
   * Compares the daemon's apiVersion with the one this client was
   * generated for, warning (once per client) when they differ.
   */
  async checkVersion(opts: CallOptions = {}): Promise<VersionCheck> {
    const info = await this.info(opts);
    return { ok: info.apiVersion === apiVersion, server: info.apiVersion, client: apiVersion };
  }

  /** Creates a sandbox and waits until its workload is ready. */
  async create(req: CreateSandboxRequest = {}, opts: CallOptions = {}): Promise<Sandbox> {
    return this.#call(() => this.#api.POST("/sandboxes", { body: req, signal: opts.signal }), opts.signal);
  }

  /** The sandboxes the filter picks (every one without), oldest first. */
  async list(opts: CallOptions & Filter = {}): Promise<Sandbox[]> {
    const query = filterQuery(opts);
    const list = await this.#call(
      () => this.#api.GET("/sandboxes", { querySerializer: () => query, signal: opts.signal }),
      opts.signal,
    );
    return list.items;
  }

  /** One sandbox, by id or name. */
  async get(idOrName: string, opts: CallOptions = {}): Promise<Sandbox> {
    return this.#call(
      () => this.#api.GET("/sandboxes/{idOrName}", { params: { path: { idOrName } }, signal: opts.signal }),
      opts.signal,
    );
  }

  /** Stops and removes a sandbox with its directory; deleting a missing one succeeds. */
  async delete(idOrName: string, opts: CallOptions = {}): Promise<void> {
    await this.#call(
      () => this.#api.DELETE("/sandboxes/{idOrName}", { params: { path: { idOrName } }, signal: opts.signal }),
      opts.signal,
    );
  }

  /** Stops the workload, keeping its directory; reason becomes its errorReason. */
  async stop(idOrName: string, opts: CallOptions & { reason?: string } = {}): Promise<Sandbox> {
    return this.#call(
      () =>
        this.#api.POST("/sandboxes/{idOrName}/stop", {
          params: { path: { idOrName } },
          body: opts.reason !== undefined ? { reason: opts.reason } : undefined,
          signal: opts.signal,
        }),
      opts.signal,
    );
  }

  /** Respawns a stopped sandbox; a no-op when it is started. */
  async start(idOrName: string, opts: CallOptions = {}): Promise<Sandbox> {
    return this.#call(
      () => this.#api.POST("/sandboxes/{idOrName}/start", { params: { path: { idOrName } }, signal: opts.signal }),
      opts.signal,
    );
  }

  /** Resets the sandbox's idle clock. */
  async refreshActivity(idOrName: string, opts: CallOptions = {}): Promise<void> {
    await this.#call(
      () =>
        this.#api.POST("/sandboxes/{idOrName}/refresh-activity", {
          params: { path: { idOrName } },
          signal: opts.signal,
        }),
      opts.signal,
    );
  }

  /** Sets the idle minutes before auto-stop; 0 disables it. */
  async setAutoStopInterval(idOrName: string, minutes: number, opts: CallOptions = {}): Promise<Sandbox> {
    return this.#call(
      () =>
        this.#api.POST("/sandboxes/{idOrName}/autostop", {
          params: { path: { idOrName } },
          body: { interval: minutes },
          signal: opts.signal,
        }),
      opts.signal,
    );
  }

  /** Accepted and ignored by the local daemon; returns the sandbox. */
  async resize(idOrName: string, req: ResizeRequest, opts: CallOptions = {}): Promise<Sandbox> {
    return this.#call(
      () =>
        this.#api.POST("/sandboxes/{idOrName}/resize", {
          params: { path: { idOrName } },
          body: req,
          signal: opts.signal,
        }),
      opts.signal,
    );
  }

  /**
   * Where a port of the sandbox (its workload port by default) is
   * reachable from the host, with the token to send as
   * X-Daytona-Preview-Token.
   */
  async previewUrl(idOrName: string, opts: CallOptions & { port?: number } = {}): Promise<PreviewUrl> {
    return this.#call(
      () =>
        this.#api.GET("/sandboxes/{idOrName}/preview-url", {
          params: { path: { idOrName }, query: opts.port !== undefined ? { port: opts.port } : undefined },
          signal: opts.signal,
        }),
      opts.signal,
    );
  }

  /** What the workload printed, secret env values redacted. */
  async entrypointLogs(idOrName: string, opts: CallOptions = {}): Promise<EntrypointLogs> {
    return this.#call(
      () =>
        this.#api.GET("/sandboxes/{idOrName}/entrypoint-logs", {
          params: { path: { idOrName } },
          signal: opts.signal,
        }),
      opts.signal,
    );
  }

  /**
   * The lifecycle events, as an async iterator. The first is a
   * `sandboxes_replaced` snapshot of every matching sandbox, then one per
   * change. A dropped connection is reconnected with Last-Event-ID (backing
   * off between tries), so the iteration goes on across daemon restarts; a
   * daemon that cannot replay what was missed sends a fresh snapshot. It
   * ends cleanly when opts.signal fires or the loop breaks, and throws only
   * what reconnecting cannot fix (a wrong token, a bad filter).
   */
  async *events(opts: EventsOptions = {}): AsyncGenerator<Event, void, undefined> {
    const outer = opts.signal;
    const min = opts.minBackoffMs ?? 100;
    const max = opts.maxBackoffMs ?? 5000;
    const query = filterQuery(opts);
    let lastId = opts.lastEventId !== undefined ? String(opts.lastEventId) : undefined;
    let attempt = 0;
    this.#backgroundVersionCheck();
    while (!outer?.aborted) {
      // Each connection has its own controller, so that leaving the loop
      // (or the caller's abort) closes it.
      const ctl = new AbortController();
      const abort = () => ctl.abort(outer?.reason);
      outer?.addEventListener("abort", abort, { once: true });
      let failure: unknown;
      try {
        let result: { data?: ReadableStream<Uint8Array> | null; error?: unknown; response: Response };
        try {
          result = await this.#api.GET("/events", {
            params: { header: lastId !== undefined ? { "Last-Event-ID": lastId } : {} },
            headers: { Accept: "text/event-stream" },
            querySerializer: () => query,
            parseAs: "stream",
            cache: "no-store",
            signal: ctl.signal,
          });
        } catch (err) {
          throw errorFromThrown(err, ctl.signal);
        }
        const res = result.response;
        if (!res.ok || !result.data) {
          const err = errorFromResponse(res, result.error);
          if (fatalStreamCodes.has(err.code)) {
            throw err;
          }
          failure = err;
        } else {
          for await (const msg of parseSSE(result.data)) {
            let ev: Event;
            try {
              ev = JSON.parse(msg.data) as Event;
            } catch {
              this.#onWarning(`sandplane: an event that is not JSON was skipped (id ${msg.id ?? "none"})`);
              continue;
            }
            if (msg.id !== undefined) {
              lastId = msg.id;
            }
            attempt = 0;
            if (outer?.aborted) {
              return; // nothing already buffered comes after the abort
            }
            yield ev;
            if (outer?.aborted) {
              return;
            }
          }
          failure = new ControlPlaneError("unavailable", "the event stream ended", 0);
        }
      } catch (err) {
        if (outer?.aborted) {
          return;
        }
        if (err instanceof ControlPlaneError && fatalStreamCodes.has(err.code)) {
          throw err;
        }
        failure = err;
      } finally {
        outer?.removeEventListener("abort", abort);
        ctl.abort();
      }
      attempt++;
      opts.onReconnect?.(failure, attempt);
      const wait = Math.min(max, min * 2 ** (attempt - 1));
      // Jitter, so that many clients of a restarted daemon do not return at once.
      await sleep(wait / 2 + (Math.random() * wait) / 2, outer);
    }
  }

  /**
   * A keep-alive helper for one sandbox: touch() on each use, hold(stream)
   * while a response streams. intervalMs is its auto-stop interval in
   * milliseconds.
   */
  refresher(idOrName: string, opts: RefresherOptions): Refresher {
    return new Refresher(() => this.refreshActivity(idOrName), opts);
  }

  /** Runs one call, turning a failure into a ControlPlaneError. */
  async #call<T>(
    send: () => Promise<{ data?: T; error?: unknown; response: Response }>,
    signal: AbortSignal | undefined,
  ): Promise<T> {
    this.#backgroundVersionCheck();
    let result: { data?: T; error?: unknown; response: Response };
    try {
      result = await send();
    } catch (err) {
      throw errorFromThrown(err, signal);
    }
    if (!result.response.ok) {
      throw errorFromResponse(result.response, result.error);
    }
    return result.data as T;
  }

  #backgroundVersionCheck(): void {
    if (this.#versionChecked) {
      return;
    }
    this.#versionChecked = true;
    this.info().catch(() => {});
  }

  #compare(server: string): void {
    if (server === apiVersion || this.#warned) {
      return;
    }
    this.#warned = true;
    this.#onWarning(
      `sandplane: the daemon at ${this.baseUrl} serves API ${server}, but this client was generated for ${apiVersion} ` +
        `(contract version ${contractVersion}); update @sandplane/client or the daemon`,
    );
  }
}

/** Waits ms, or less if signal fires. */
function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) {
      resolve();
      return;
    }
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}
