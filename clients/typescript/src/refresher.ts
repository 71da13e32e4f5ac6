/** Options of ControlPlaneClient.refresher. */
export interface RefresherOptions {
  /**
   * The sandbox's auto-stop interval in milliseconds (its autoStopInterval
   * times the daemon's minute). touch() refreshes at most once per a third
   * of it, and hold() beats that often.
   */
  intervalMs: number;
  /** Called with each failed refresh, after it is counted; never thrown. */
  onError?: (err: unknown) => void;
  /** The clock, for tests; Date.now by default. */
  now?: () => number;
}

/**
 * Keeps one sandbox from auto-stopping while its host uses it, as the
 * relay does for previews: touch() on each use refreshes its activity,
 * debounced to one call per interval/3, and hold() beats at that pace for
 * as long as a stream stays open. Refreshes run off the caller's path: a
 * failure is counted in errors and handed to onError, never thrown.
 */
export class Refresher {
  /** How many refreshes failed. */
  errors = 0;
  /** The last refresh failure, if any. */
  lastError: unknown = undefined;
  /** How many refreshes were sent. */
  sent = 0;

  readonly #refresh: () => Promise<void>;
  readonly #window: number;
  readonly #onError?: (err: unknown) => void;
  readonly #now: () => number;
  #last = -Infinity; // when the last refresh was sent
  #inFlight: Promise<void> | undefined;
  #closed = false;
  readonly #holds = new Set<() => void>();

  /** @internal Use ControlPlaneClient.refresher. */
  constructor(refresh: () => Promise<void>, opts: RefresherOptions) {
    if (!(opts.intervalMs > 0)) {
      throw new RangeError("refresher: intervalMs must be a positive number of milliseconds");
    }
    this.#refresh = refresh;
    this.#window = opts.intervalMs / 3;
    this.#onError = opts.onError;
    this.#now = opts.now ?? Date.now;
  }

  /** The debounce window and heartbeat period: a third of the interval. */
  get windowMs(): number {
    return this.#window;
  }

  /**
   * Records a use: refreshes the sandbox's activity unless a refresh was
   * sent less than interval/3 ago or is still under way. Never throws.
   */
  touch(): void {
    if (this.#closed || this.#inFlight) {
      return;
    }
    const now = this.#now();
    if (now - this.#last < this.#window) {
      return;
    }
    this.#last = now;
    this.sent++;
    this.#inFlight = this.#refresh()
      .catch((err: unknown) => {
        this.errors++;
        this.lastError = err;
        try {
          this.#onError?.(err);
        } catch {
          // an observer's failure is not the data path's either
        }
      })
      .finally(() => {
        this.#inFlight = undefined;
      });
  }

  /**
   * Keeps the sandbox alive for as long as stream stays open: returns a
   * stream that passes every chunk of it through, touching on each, and
   * beats every interval/3 until it ends, errors or is cancelled. A
   * promise is held until it settles, and returned as it is.
   */
  hold<T>(stream: ReadableStream<T>): ReadableStream<T>;
  hold<P extends PromiseLike<unknown>>(promise: P): P;
  hold(what: ReadableStream<unknown> | PromiseLike<unknown>): unknown {
    if (typeof (what as ReadableStream).getReader === "function") {
      return this.#holdStream(what as ReadableStream<unknown>);
    }
    const release = this.#beat();
    (what as PromiseLike<unknown>).then(release, release);
    return what;
  }

  /** How many holds are beating. */
  get holding(): number {
    return this.#holds.size;
  }

  /** Stops every heartbeat; touch() and hold() do nothing from now on. */
  close(): void {
    this.#closed = true;
    for (const release of [...this.#holds]) {
      release();
    }
  }

  /** Starts a heartbeat; the function returned stops it (once). */
  #beat(): () => void {
    if (this.#closed) {
      return () => {};
    }
    this.touch();
    const timer = setInterval(() => this.touch(), this.#window);
    // In Node, a heartbeat alone does not keep the process running.
    (timer as { unref?: () => void }).unref?.();
    const release = () => {
      clearInterval(timer);
      this.#holds.delete(release);
    };
    this.#holds.add(release);
    return release;
  }

  #holdStream<T>(stream: ReadableStream<T>): ReadableStream<T> {
    const reader = stream.getReader();
    let release: (() => void) | undefined;
    const stop = () => {
      release?.();
      release = undefined;
    };
    return new ReadableStream<T>({
      start: () => {
        release = this.#beat();
      },
      pull: async (controller) => {
        try {
          const { value, done } = await reader.read();
          if (done) {
            stop();
            controller.close();
            return;
          }
          this.touch();
          controller.enqueue(value);
        } catch (err) {
          stop();
          controller.error(err);
        }
      },
      cancel: async (reason) => {
        stop();
        await reader.cancel(reason);
      },
    });
  }
}
