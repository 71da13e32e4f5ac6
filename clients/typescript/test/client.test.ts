// The client against real `sandplane serve` daemons (see daemon.ts).
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { after, describe, test } from "node:test";
import { fileURLToPath } from "node:url";

import { ControlPlaneClient, ControlPlaneError, apiVersion, parseSSE, type Event } from "../src/index.js";
import { Daemon, freeAddr, stopAll } from "./daemon.js";

after(stopAll);

/** The sandboxes a test made, deleted when it ends, pass or fail. */
async function withSandboxes(client: ControlPlaneClient, fn: (made: string[]) => Promise<void>): Promise<void> {
  const made: string[] = [];
  try {
    await fn(made);
  } finally {
    for (const id of made) {
      await client.delete(id).catch(() => {});
    }
  }
}

/** The error fn throws, which must be a ControlPlaneError. */
async function failure(fn: () => Promise<unknown>): Promise<ControlPlaneError> {
  try {
    await fn();
  } catch (err) {
    assert.ok(err instanceof ControlPlaneError, `not a ControlPlaneError: ${err}`);
    return err;
  }
  assert.fail("the call succeeded");
}

/** Reads events from it until one satisfies want, failing after ms. */
async function until(
  it: AsyncIterator<Event>,
  want: (e: Event) => boolean,
  what: string,
  ms = 20_000,
): Promise<Event> {
  const deadline = Date.now() + ms;
  for (;;) {
    const left = deadline - Date.now();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const r = await Promise.race([
      it.next(),
      new Promise<"timeout">((ok) => (timer = setTimeout(() => ok("timeout"), Math.max(left, 0)))),
    ]);
    clearTimeout(timer);
    if (r === "timeout") {
      assert.fail(`no ${what} within ${ms} ms`);
    }
    assert.ok(!r.done, `the stream ended before ${what}`);
    if (want(r.value)) {
      return r.value;
    }
  }
}

describe("a daemon without a token", { timeout: 120_000 }, () => {
  let d: Daemon;
  let client: ControlPlaneClient;
  const warnings: string[] = [];

  test("starts", async () => {
    d = await Daemon.start();
    client = new ControlPlaneClient({ baseUrl: d.url, onWarning: (w) => warnings.push(w) });
  });

  test("info and the version check", async () => {
    const info = await client.info();
    assert.equal(info.name, "sandplane");
    assert.equal(info.apiVersion, apiVersion);
    assert.equal(info.pid, d.pid);
    assert.equal(info.rootDir, d.root);
    assert.deepEqual(await client.checkVersion(), { ok: true, server: apiVersion, client: apiVersion });
    assert.deepEqual(warnings, []);
  });

  test("every sandbox method", async () => {
    await withSandboxes(client, async (made) => {
      const sb = await client.create({ name: "ts-every", labels: { suite: "every", team: "a" }, envVars: { SECRET_X: "hunter2" } });
      made.push(sb.id);
      assert.equal(sb.name, "ts-every");
      assert.equal(sb.state, "started");
      assert.ok(sb.port > 0);
      const other = await client.create({ labels: { suite: "every", team: "b" } });
      made.push(other.id);

      const all = await client.list();
      assert.ok(all.some((s) => s.id === sb.id) && all.some((s) => s.id === other.id));
      assert.deepEqual((await client.list({ labels: { suite: "every", team: "a" } })).map((s) => s.id), [sb.id]);
      assert.deepEqual(await client.list({ labels: { suite: "none such" } }), []);

      assert.equal((await client.get("ts-every")).id, sb.id);
      assert.equal((await client.get(sb.id)).name, "ts-every");

      const preview = await client.previewUrl(sb.id);
      assert.match(preview.url, /^http:\/\//);
      assert.ok(preview.token.length > 0);
      const page = await fetch(preview.url, { headers: { "X-Daytona-Preview-Token": preview.token } });
      await page.body?.cancel();
      assert.ok(page.status < 500, `preview answered ${page.status}`);
      assert.equal((await client.previewUrl(sb.id, { port: 4000 })).url, preview.url);

      const logs = await client.entrypointLogs(sb.id);
      assert.equal(typeof logs.output, "string");
      assert.ok(!logs.output.includes("hunter2"), "a secret env value reached the logs");

      assert.equal((await client.setAutoStopInterval(sb.id, 0)).autoStopInterval, 0);
      assert.equal((await client.setAutoStopInterval(sb.id, 30)).autoStopInterval, 30);
      assert.equal((await client.resize(sb.id, { cpu: 2, memory: 4 })).id, sb.id);

      const before = (await client.get(sb.id)).lastActivityAt;
      await new Promise((ok) => setTimeout(ok, 20));
      await client.refreshActivity(sb.id);
      const later = (await client.get(sb.id)).lastActivityAt;
      assert.ok(Date.parse(later) > Date.parse(before), `lastActivityAt ${before} -> ${later}`);

      const stopped = await client.stop(sb.id, { reason: "pool: evicted" });
      assert.equal(stopped.state, "stopped");
      assert.equal(stopped.errorReason, "pool: evicted");
      assert.equal((await client.stop(other.id)).state, "stopped");

      const started = await client.start(sb.id);
      assert.equal(started.state, "started");
      assert.equal((await client.start(sb.id)).state, "started", "start is a no-op when started");

      await client.delete(sb.id);
      assert.equal((await failure(() => client.get(sb.id))).code, "not_found");
      await client.delete(sb.id); // idempotent
    });
  });

  test("bad input gets each error's code", async () => {
    await withSandboxes(client, async (made) => {
      let e = await failure(() => client.create({ name: "not a name!" }));
      assert.equal(e.code, "invalid_argument");
      assert.equal(e.status, 400);
      assert.match(e.message, /name/);

      e = await failure(() => client.get("no-such-sandbox"));
      assert.equal(e.code, "not_found");
      assert.equal(e.status, 404);
      for (const call of [
        () => client.stop("no-such-sandbox"),
        () => client.start("no-such-sandbox"),
        () => client.refreshActivity("no-such-sandbox"),
        () => client.setAutoStopInterval("no-such-sandbox", 1),
        () => client.resize("no-such-sandbox", { cpu: 1 }),
        () => client.previewUrl("no-such-sandbox"),
        () => client.entrypointLogs("no-such-sandbox"),
      ]) {
        assert.equal((await failure(call)).code, "not_found");
      }

      const sb = await client.create({ name: "ts-bad" });
      made.push(sb.id);
      e = await failure(() => client.create({ name: "ts-bad" }));
      assert.equal(e.code, "already_exists");
      assert.equal(e.status, 409);
      assert.equal((await failure(() => client.stop(sb.id, { reason: "!no" }))).code, "invalid_argument");
      assert.equal((await failure(() => client.setAutoStopInterval(sb.id, -1))).code, "invalid_argument");
      assert.equal((await failure(() => client.resize(sb.id, { cpu: 0 }))).code, "invalid_argument");
      assert.equal((await failure(() => client.previewUrl(sb.id, { port: 1 }))).code, "invalid_argument");
      assert.equal((await failure(() => client.previewUrl(sb.id, { port: 70000 }))).code, "invalid_argument");
      assert.equal((await failure(() => client.create({ runtime: "nope" as "native" }))).code, "invalid_argument");
    });
  });

  test("a call aborted by its signal is canceled", async () => {
    const ctl = new AbortController();
    ctl.abort();
    const e = await failure(() => client.list({ signal: ctl.signal }));
    assert.equal(e.code, "canceled");
    assert.equal(e.status, 0);
  });

  test("events: the snapshot, then created and stopped", async () => {
    await withSandboxes(client, async (made) => {
      const pre = await client.create({ labels: { suite: "events" } });
      made.push(pre.id);
      const ctl = new AbortController();
      const it = client.events({ labels: { suite: "events" }, signal: ctl.signal });
      const first = await until(it, () => true, "the first event");
      assert.equal(first.type, "sandboxes_replaced");
      assert.deepEqual(first.sandboxes?.map((s) => s.id), [pre.id]);

      const sb = await client.create({ labels: { suite: "events" } });
      made.push(sb.id);
      await client.create({ labels: { suite: "other" } }).then((o) => made.push(o.id));
      const created = await until(it, (e) => e.type === "sandbox.created", "sandbox.created");
      assert.equal(created.sandbox?.id, sb.id, "an event of another label came through the filter");
      assert.ok(created.seq > first.seq);

      await client.stop(sb.id, { reason: "test: done" });
      const stopped = await until(it, (e) => e.type === "sandbox.stopped", "sandbox.stopped");
      assert.equal(stopped.sandbox?.id, sb.id);
      assert.equal(stopped.sandbox?.errorReason, "test: done");

      // Aborting ends the iteration cleanly.
      const pending = it.next();
      ctl.abort();
      assert.deepEqual(await pending, { done: true, value: undefined });
    });
  });

  test("the host's create body, one identity and sessions", async () => {
    await withSandboxes(client, async (made) => {
      const sb = await client.create({
        name: "ts-host", sessionId: "sess-ts", public: false, autoDeleteInterval: 30, autoArchiveInterval: 60, cpu: 2,
      });
      made.push(sb.id);
      assert.equal(sb.id, "ts-host", "id === name");
      assert.equal(sb.sessionId, "sess-ts");
      assert.equal(sb.autoDeleteInterval, 30);
      const minted = await client.create({});
      made.push(minted.id);
      assert.equal(minted.name, minted.id);
      assert.equal(minted.sessionId, null);

      assert.deepEqual((await client.list({ sessionId: "sess-ts" })).map((s) => s.id), [sb.id]);
      assert.deepEqual(await client.list({ sessionId: "sess-none" }), []);
      assert.equal((await failure(() => client.create({ id: "ts-a", name: "ts-b" }))).code, "invalid_argument");

      const ctl = new AbortController();
      const it = client.events({ sessionId: "sess-ts", signal: ctl.signal });
      const first = await until(it, () => true, "the first event");
      assert.deepEqual(first.sandboxes?.map((s) => s.id), [sb.id]);
      await client.stop(minted.id);
      await client.stop(sb.id);
      const stopped = await until(it, (e) => e.type === "sandbox.stopped", "sandbox.stopped");
      assert.equal(stopped.sandbox?.id, sb.id, "an event of another session came through the filter");
      ctl.abort();
    });
  });

  test("events: breaking out of the loop closes the stream", async () => {
    for await (const ev of client.events()) {
      assert.equal(ev.type, "sandboxes_replaced");
      break;
    }
  });

  test("events: resume from lastEventId replays what was missed", async () => {
    await withSandboxes(client, async (made) => {
      const ctl = new AbortController();
      const it = client.events({ labels: { suite: "replay" }, signal: ctl.signal });
      const snap = await until(it, () => true, "the snapshot");
      ctl.abort();
      await it.next();
      const sb = await client.create({ labels: { suite: "replay" } });
      made.push(sb.id);
      const again = new AbortController();
      const resumed = client.events({ labels: { suite: "replay" }, signal: again.signal, lastEventId: snap.seq });
      const ev = await until(resumed, () => true, "the replayed event");
      assert.equal(ev.type, "sandbox.created", "a resume within the ring replays instead of a snapshot");
      assert.equal(ev.sandbox?.id, sb.id);
      again.abort();
      await resumed.next();
    });
  });

  test("the refresher debounces, holds and swallows errors", async () => {
    await withSandboxes(client, async (made) => {
      const sb = await client.create({ labels: { suite: "refresher" } });
      made.push(sb.id);
      let calls = 0;
      const counting = new ControlPlaneClient({
        baseUrl: d.url,
        checkVersion: false,
        fetch: async (input, init) => {
          const url = input instanceof Request ? input.url : String(input);
          if (url.endsWith("/refresh-activity")) {
            calls++;
          }
          return fetch(input, init);
        },
      });
      const r = counting.refresher(sb.id, { intervalMs: 600 });
      assert.equal(r.windowMs, 200);
      for (let i = 0; i < 20; i++) {
        r.touch();
      }
      await new Promise((ok) => setTimeout(ok, 50));
      assert.equal(calls, 1, "touches within interval/3 send one refresh");
      await new Promise((ok) => setTimeout(ok, 200));
      r.touch();
      await new Promise((ok) => setTimeout(ok, 50));
      assert.equal(calls, 2, "a touch after interval/3 refreshes again");

      // hold: beats while the stream stays open, and stops when it ends.
      let close!: () => void;
      const source = new ReadableStream<Uint8Array>({
        start(c) {
          c.enqueue(new Uint8Array([1]));
          close = () => c.close();
        },
      });
      const held = r.hold(source);
      assert.equal(r.holding, 1);
      const reader = held.getReader();
      assert.deepEqual((await reader.read()).value, new Uint8Array([1]));
      const atHold = calls;
      await new Promise((ok) => setTimeout(ok, 750));
      // Four beats are due; one may be skipped while the one before is under way.
      assert.ok(calls - atHold >= 2, `the hold beat ${calls - atHold} times in 750 ms at 200 ms`);
      close();
      assert.equal((await reader.read()).done, true);
      assert.equal(r.holding, 0, "the hold ended with its stream");
      const atEnd = calls;
      await new Promise((ok) => setTimeout(ok, 450));
      assert.equal(calls, atEnd, "no beat after the stream ended");

      // hold of a promise, and of a stream that errors
      let settle!: () => void;
      const p = r.hold(new Promise<void>((ok) => (settle = ok)));
      assert.equal(r.holding, 1);
      settle();
      await p;
      await Promise.resolve();
      assert.equal(r.holding, 0);
      const failing = r.hold(
        new ReadableStream({
          pull(c) {
            c.error(new Error("reset"));
          },
        }),
      );
      await assert.rejects(failing.getReader().read(), /reset/);
      assert.equal(r.holding, 0, "the hold ended with its stream's error");
      assert.equal(r.errors, 0);
      r.close();
      const sent = r.sent;
      await new Promise((ok) => setTimeout(ok, 250));
      r.touch();
      assert.equal(r.sent, sent, "a closed refresher sends nothing");

      // Errors are counted, never thrown.
      const seen: unknown[] = [];
      const missing = client.refresher("no-such-sandbox", { intervalMs: 300, onError: (e) => seen.push(e) });
      missing.touch();
      const h = missing.hold(new Promise((ok) => setTimeout(ok, 250)));
      await h;
      for (let waited = 0; missing.errors < 2 && waited < 2000; waited += 20) {
        await new Promise((ok) => setTimeout(ok, 20));
      }
      assert.ok(missing.errors >= 2, `errors ${missing.errors}`);
      assert.equal(seen.length, missing.errors);
      assert.ok(missing.lastError instanceof ControlPlaneError && missing.lastError.code === "not_found");
      missing.close();
    });
  });

  test("a page on localhost may call it (CORS), a preview's may not", async () => {
    const origin = "http://localhost:5173";
    const pre = await fetch(`${d.url}/sandboxes`, {
      method: "OPTIONS",
      headers: {
        Origin: origin,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization,content-type,last-event-id",
      },
    });
    assert.equal(pre.status, 204);
    assert.equal(pre.headers.get("access-control-allow-origin"), origin);
    const allowed = (pre.headers.get("access-control-allow-headers") ?? "").toLowerCase();
    for (const h of ["authorization", "content-type", "last-event-id"]) {
      assert.ok(allowed.includes(h), `preflight does not allow ${h}: ${allowed}`);
    }
    assert.match(pre.headers.get("access-control-allow-methods") ?? "", /DELETE/);
    const ctl = new AbortController();
    const ev = await fetch(`${d.url}/events`, { headers: { Origin: origin }, signal: ctl.signal });
    assert.equal(ev.headers.get("access-control-allow-origin"), origin);
    ctl.abort();
    await ev.body?.cancel().catch(() => {});
    const preview = await fetch(`${d.url}/sandboxes`, { headers: { Origin: "http://4000-abc.localhost:4025" } });
    assert.equal(preview.status, 403);
    await preview.body?.cancel();
  });

  test("stops", async () => {
    assert.deepEqual(await client.list({ labels: { suite: "every" } }), []);
    await d.stop();
  });
});

describe("a daemon that restarts", { timeout: 120_000 }, () => {
  test("the event stream resumes and sees later events", async () => {
    const d = await Daemon.start();
    const client = new ControlPlaneClient({ baseUrl: d.url });
    const ctl = new AbortController();
    const reconnects: unknown[] = [];
    try {
      await withSandboxes(client, async (made) => {
        const it = client.events({
          labels: { suite: "restart" },
          signal: ctl.signal,
          minBackoffMs: 50,
          maxBackoffMs: 500,
          onReconnect: (err) => reconnects.push(err),
        });
        assert.equal((await until(it, () => true, "the snapshot")).type, "sandboxes_replaced");
        const a = await client.create({ labels: { suite: "restart" } });
        made.push(a.id);
        assert.equal((await until(it, (e) => e.type === "sandbox.created", "created before")).sandbox?.id, a.id);

        // Read on while the daemon is killed and restarted on the same root
        // and port. The new daemon cannot replay the old one's events (its
        // sequence numbers start above them), so the stream goes on with a
        // fresh snapshot, then the events after it.
        const resumed = until(it, (e) => e.type === "sandboxes_replaced", "the new daemon's snapshot", 40_000);
        await d.kill();
        await new Promise((ok) => setTimeout(ok, 300));
        await d.restart();
        const snap = await resumed;
        assert.deepEqual(snap.sandboxes?.map((s) => s.id), [a.id]);
        assert.ok(reconnects.length >= 1, "the stream did not reconnect");
        const b = await client.create({ labels: { suite: "restart" } });
        made.push(b.id);
        const created = await until(it, (e) => e.type === "sandbox.created", "created after the restart");
        assert.equal(created.sandbox?.id, b.id);
        assert.ok(created.seq > snap.seq);
        // The first sandbox outlived the daemon; the new one adopted it.
        assert.equal((await client.get(a.id)).state, "started");
      });
    } finally {
      ctl.abort();
      await d.stop();
    }
  });
});

describe("a daemon with a token", { timeout: 60_000 }, () => {
  test("refuses without the token and works with it", async () => {
    const d = await Daemon.start({ token: "ts-test-token" });
    try {
      const anon = new ControlPlaneClient({ baseUrl: d.url, checkVersion: false });
      const e = await failure(() => anon.list());
      assert.equal(e.code, "unauthenticated");
      assert.equal(e.status, 401);
      assert.equal((await failure(() => anon.create())).code, "unauthenticated");
      const probe = await anon.info();
      assert.equal(probe.name, "sandplane");
      assert.equal(probe.pid, undefined, "info without the token holds only name and versions");
      assert.equal(probe.auth?.state, "required", "and says the caller needs the token");
      await assert.rejects(
        (async () => {
          for await (const _ of anon.events()) {
            assert.fail("an event without the token");
          }
        })(),
        (err: unknown) => err instanceof ControlPlaneError && err.code === "unauthenticated",
      );
      const wrong = new ControlPlaneClient({ baseUrl: d.url, token: "wrong", checkVersion: false });
      assert.equal((await failure(() => wrong.list())).code, "unauthenticated");
      assert.match((await wrong.info()).auth?.why ?? "", /not the daemon's/);

      const client = new ControlPlaneClient({ baseUrl: d.url, token: "ts-test-token" });
      const info = await client.info();
      assert.equal(info.pid, d.pid);
      assert.equal(info.auth?.state, "authenticated");
      await withSandboxes(client, async (made) => {
        const sb = await client.create({ labels: { suite: "token" } });
        made.push(sb.id);
        assert.deepEqual((await client.list()).map((s) => s.id), [sb.id]);
        for await (const ev of client.events()) {
          assert.deepEqual(ev.sandboxes?.map((s) => s.id), [sb.id]);
          break;
        }
      });
    } finally {
      await d.stop();
    }
  });
});

describe("failures without the daemon's error body", () => {
  test("no daemon on the port is unavailable", async () => {
    const client = new ControlPlaneClient({ baseUrl: `http://${await freeAddr()}/v1`, checkVersion: false });
    const e = await failure(() => client.list());
    assert.equal(e.code, "unavailable");
    assert.equal(e.status, 0);
  });

  test("a proxy's page gets its status's code", async () => {
    const page = (status: number) =>
      new ControlPlaneClient({
        checkVersion: false,
        fetch: async () => new Response("<html>Bad Gateway</html>", { status, headers: { "Content-Type": "text/html" } }),
      });
    let e = await failure(() => page(502).get("x"));
    assert.equal(e.code, "unavailable");
    assert.equal(e.status, 502);
    assert.match(e.message, /Bad Gateway/);
    e = await failure(() => page(404).get("x"));
    assert.equal(e.code, "not_found");
  });

  test("another apiVersion warns once", async () => {
    const warnings: string[] = [];
    const client = new ControlPlaneClient({
      onWarning: (w) => warnings.push(w),
      fetch: async (input) => {
        const url = input instanceof Request ? input.url : String(input);
        if (url.endsWith("/info")) {
          return Response.json({ name: "sandplane", version: "future", apiVersion: "v9" });
        }
        return Response.json({ items: [] });
      },
    });
    assert.deepEqual(await client.list(), []); // the first call checks in the background
    await new Promise((ok) => setTimeout(ok, 20));
    assert.equal(warnings.length, 1);
    assert.match(warnings[0]!, /v9/);
    assert.deepEqual(await client.checkVersion(), { ok: false, server: "v9", client: apiVersion });
    await client.info();
    assert.equal(warnings.length, 1, "the mismatch warns once");
  });
});

describe("the SSE parser", () => {
  test("fields, line endings, comments and chunk boundaries", async () => {
    const text = ': keep-alive\r\n\r\nid: 7\r\nevent: a\r\ndata: {"x":\r\ndata: 1}\r\n\r\ndata:no space\n\nid: 9\revent: b\rretry: 10\rdata: z\r\r: tail\nid: 10\ndata: partial';
    const bytes = new TextEncoder().encode(text);
    for (const size of [1, 2, 3, 7, bytes.length]) {
      const body = new ReadableStream<Uint8Array>({
        start(c) {
          for (let i = 0; i < bytes.length; i += size) {
            c.enqueue(bytes.slice(i, i + size));
          }
          c.close();
        },
      });
      const got = [];
      for await (const m of parseSSE(body)) {
        got.push(m);
      }
      assert.deepEqual(
        got,
        [
          { id: "7", event: "a", data: '{"x":\n1}' },
          { id: "7", event: "message", data: "no space" },
          { id: "9", event: "b", data: "z", retry: 10 },
        ],
        `chunks of ${size}`,
      );
    }
  });
});

describe("the library", () => {
  test("imports nothing of Node, so that it runs in a browser", () => {
    // build-test/test -> build-test/src, the library as compiled for the tests
    const src = join(dirname(fileURLToPath(import.meta.url)), "..", "src");
    const files = readdirSync(src, { recursive: true }).map(String).filter((f) => f.endsWith(".js"));
    assert.ok(files.includes("index.js"), `no index.js in ${src}`);
    for (const f of files) {
      // Without comments, which may show Node usage in examples.
      const code = readFileSync(join(src, f), "utf8")
        .replace(/\/\*[\s\S]*?\*\//g, "")
        .replace(/^\s*\/\/.*$/gm, "");
      for (const m of code.matchAll(/(?:^|\n)\s*(?:import|export)\b[^;]*?from\s*["']([^"']+)["']/g)) {
        const spec = m[1]!;
        assert.ok(spec.startsWith("./") || spec === "openapi-fetch", `${f} imports ${spec}`);
      }
      assert.ok(!/\brequire\(|\bprocess\.|\bBuffer\b/.test(code), `${f} uses a Node global`);
    }
  });
});
