// A real `sandplane serve` for the tests: its own temporary root, a free
// loopback port, a window of sandbox ports of its own, and a token when
// asked. Every daemon started here is stopped by stopAll (by its PID, never
// by name), which the tests call in an after hook; process exit kills any
// that is left.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** The directory every root and temporary file goes under. */
const scratch = mkdtempSync(join(process.env.SANDPLANE_TEST_TMPDIR || tmpdir(), "sandplane-ts-"));

let binary = process.env.SANDPLANE_BIN;

/** The sandplane binary: $SANDPLANE_BIN, or one built from this tree. */
function sandplaneBinary(): string {
  if (binary) {
    return binary;
  }
  // build-test/test/daemon.js -> the repository root
  const repo = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "..");
  const out = join(scratch, "bin", "sandplane");
  const r = spawnSync("go", ["build", "-o", out, "./cmd/sandplane"], { cwd: repo, encoding: "utf8" });
  if (r.status !== 0) {
    throw new Error(`go build ./cmd/sandplane failed: ${r.error ?? ""}${r.stderr}`);
  }
  binary = out;
  return out;
}

/** A loopback address nobody listens on right now. */
export async function freeAddr(): Promise<string> {
  return new Promise((ok, fail) => {
    const srv = createServer();
    srv.once("error", fail);
    srv.listen(0, "127.0.0.1", () => {
      const a = srv.address();
      srv.close(() => (a && typeof a === "object" ? ok(`127.0.0.1:${a.port}`) : fail(new Error("no address"))));
    });
  });
}

const running = new Set<Daemon>();
let nextPorts = 10000 + Math.floor(Math.random() * 190) * 100;

export interface DaemonOptions {
  root?: string;
  addr?: string;
  token?: string;
  minute?: string;
}

export class Daemon {
  readonly root: string;
  readonly addr: string;
  readonly url: string;
  readonly token?: string;
  stderr = "";
  #proc!: ChildProcess;
  #exited!: Promise<void>;
  #opts: Required<Pick<DaemonOptions, "minute">> & DaemonOptions;
  #config: string;

  private constructor(opts: DaemonOptions & { root: string; addr: string }) {
    this.root = opts.root;
    this.addr = opts.addr;
    this.url = `http://${opts.addr}/v1`;
    this.token = opts.token;
    this.#opts = { minute: "1m", ...opts };
    this.#config = join(mkdtempSync(join(scratch, "cfg-")), "sandplane.yaml");
    const lo = nextPorts;
    nextPorts = nextPorts + 100 > 29900 ? 10000 : nextPorts + 100;
    writeFileSync(this.#config, `ports:\n  min: ${lo}\n  max: ${lo + 99}\n`, { mode: 0o600 });
  }

  /** Starts a daemon and waits until it answers /v1/info as itself. */
  static async start(opts: DaemonOptions = {}): Promise<Daemon> {
    const root = opts.root ?? mkdtempSync(join(scratch, "root-"));
    for (let attempt = 1; ; attempt++) {
      const d = new Daemon({ ...opts, root, addr: opts.addr ?? (await freeAddr()) });
      try {
        await d.#launch();
        return d;
      } catch (err) {
        // The port may have been taken between freeAddr and the bind.
        if (opts.addr || attempt >= 3) {
          throw err;
        }
      }
    }
  }

  /** Starts this daemon again, on the same root, address and ports. */
  async restart(): Promise<void> {
    await this.stop();
    this.stderr = "";
    await this.#launch();
  }

  get pid(): number | undefined {
    return this.#proc.pid;
  }

  async #launch(): Promise<void> {
    const args = ["serve", "--listen", this.addr, "--root", this.root, "--minute", this.#opts.minute, "--config", this.#config];
    if (this.token) {
      const file = join(mkdtempSync(join(scratch, "token-")), "token");
      writeFileSync(file, this.token + "\n", { mode: 0o600 });
      args.push("--token-file", file);
    }
    const env = { ...process.env };
    delete env.SANDPLANE_TOKEN;
    delete env.SANDPLANE_URL;
    const proc = spawn(sandplaneBinary(), args, { env, stdio: ["ignore", "ignore", "pipe"] });
    this.#proc = proc;
    let exited = false;
    this.#exited = new Promise((ok) => proc.once("exit", () => ((exited = true), ok())));
    proc.stderr!.setEncoding("utf8");
    proc.stderr!.on("data", (s: string) => (this.stderr += s));
    running.add(this);
    const deadline = Date.now() + 20_000;
    const headers: Record<string, string> = this.token ? { Authorization: `Bearer ${this.token}` } : {};
    while (Date.now() < deadline) {
      if (exited) {
        running.delete(this);
        throw new Error(`sandplane serve exited before it answered:\n${this.stderr}`);
      }
      try {
        const res = await fetch(`${this.url}/info`, { headers });
        const info = (await res.json()) as { pid?: number };
        if (info.pid === proc.pid) {
          return;
        }
      } catch {
        // not up yet
      }
      await new Promise((ok) => setTimeout(ok, 25));
    }
    await this.kill();
    throw new Error(`sandplane serve did not come up within 20s:\n${this.stderr}`);
  }

  /** SIGTERM, and SIGKILL if it has not exited within 15 s. Idempotent. */
  async stop(): Promise<void> {
    if (this.#proc.exitCode !== null || this.#proc.signalCode !== null) {
      running.delete(this);
      return;
    }
    this.#proc.kill("SIGTERM");
    const timer = setTimeout(() => this.#proc.kill("SIGKILL"), 15_000);
    await this.#exited;
    clearTimeout(timer);
    running.delete(this);
  }

  /** SIGKILL, as a crash: its sandboxes keep running for the next daemon on the root. */
  async kill(): Promise<void> {
    if (this.#proc.exitCode === null && this.#proc.signalCode === null) {
      this.#proc.kill("SIGKILL");
    }
    await this.#exited;
    running.delete(this);
  }
}

/** Stops every daemon still running and removes the scratch directory. */
export async function stopAll(): Promise<void> {
  await Promise.all([...running].map((d) => d.stop()));
  rmSync(scratch, { recursive: true, force: true });
}

process.on("exit", () => {
  for (const d of running) {
    if (d.pid) {
      try {
        process.kill(d.pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
  }
});
