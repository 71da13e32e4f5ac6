// Drives the simulator with the official Daytona TypeScript SDK, unchanged.
// DAYTONA_API_URL and DAYTONA_API_KEY name the simulator; SDK_PACKAGE picks
// the SDK (@daytonaio/sdk, the pinned release, or sdk-latest, the newest);
// SDK_SCENARIO picks what to drive: "lifecycle" (default), "resources"
// (snapshots, volumes, links, the calls a container answers with an error,
// SSH, metrics, resize, network settings), "file-urls" (pre-signed file
// URLs, newest SDK only), "ttl" (create with ttlMinutes, get, list,
// setTtl, delete; newest SDK only), "autopause" (autoPauseInterval on
// create, setAutoPauseInterval, an idle pause and the resume by toolbox
// traffic; newest SDK only, against a simulator with a short minute),
// "errors" (each error class the newest SDK makes of the simulator's and
// the toolbox's error bodies, by instanceof), "secrets" (organization
// secrets and a sandbox that mounts one; newest SDK only), "warm-pools"
// (daytona.warmPool CRUD and a create a pool serves; newest SDK only,
// against a simulator with --warm-pool 1), "entrypoint", "fork" and
// "pause" (the entrypoint session, sandbox.fork with its lineage, and
// pause and resume; newest SDK only) or "docker-network" (the network
// block, with OUTSIDE_URL a server beyond the sandbox's network). Prints one
// JSON line of observations after its last call, and never calls
// process.exit on success: the process must end by itself.
'use strict'

const { Daytona, Image } = require(process.env.SDK_PACKAGE || '@daytonaio/sdk')

const seen = {}

function check(cond, what) {
  if (!cond) {
    throw new Error('check failed: ' + what + ' (seen so far: ' + JSON.stringify(seen) + ')')
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

// eventually retries f until it returns a truthy value, for up to 30 s.
async function eventually(f, what) {
  for (let i = 0; i < 300; i++) {
    const v = await f()
    if (v) return v
    await sleep(100)
  }
  throw new Error('never: ' + what)
}

// gone resolves once the sandbox answers 404.
async function gone(daytona, id) {
  return eventually(async () => {
    try {
      await daytona.get(id)
      return false
    } catch (e) {
      return true
    }
  }, 'sandbox ' + id + ' is gone')
}

// failsWith runs f and returns the message of the error it must throw.
async function failsWith(f, what) {
  try {
    await f()
  } catch (e) {
    return String(e && e.message)
  }
  throw new Error(what + ' did not fail')
}

async function lifecycle(daytona) {
  const sandbox = await daytona.create({ labels: { suite: 'ts-sdk' }, envVars: { FROM_TS: 'yes' } }, { timeout: 60 })
  seen.created = sandbox.state
  check(sandbox.state === 'started', 'create returns a started sandbox')
  check(sandbox.labels['code-toolbox-language'] === 'python', 'the SDK adds its language label')

  const exec = await sandbox.process.executeCommand('echo hello-from-ts $FROM_TS')
  seen.exec = exec
  check(exec.exitCode === 0, 'executeCommand exits 0')
  check(exec.result.trim() === 'hello-from-ts yes', 'executeCommand returns the output')

  const failing = await sandbox.process.executeCommand('echo oops >&2; exit 4')
  seen.failing = failing
  check(failing.exitCode === 4 && failing.result.trim() === 'oops', 'a failing command still answers')

  await sandbox.stop()
  seen.stopped = sandbox.state
  check(sandbox.state === 'stopped', 'stop waits until stopped')

  await sandbox.start()
  seen.restarted = sandbox.state
  check(sandbox.state === 'started', 'start waits until started')

  await sandbox.refreshActivity()

  await sandbox.setAutostopInterval(5)
  seen.autoStop = sandbox.autoStopInterval
  check(sandbox.autoStopInterval === 5, 'setAutostopInterval stores the interval')
  const reread = await daytona.get(sandbox.id)
  check(reread.autoStopInterval === 5, 'the server kept the interval')

  const link = await sandbox.getPreviewLink(3000)
  seen.previewUrl = link.url
  check(link.url.endsWith('/_preview/3000-' + sandbox.id), 'the preview link names port and sandbox')
  check(typeof link.token === 'string' && link.token.length === 32, 'the preview link carries a token')

  const listed = []
  for await (const s of daytona.list({ labels: { suite: 'ts-sdk' } })) {
    listed.push(s.id)
  }
  seen.listed = listed.length
  check(listed.length === 1 && listed[0] === sandbox.id, 'list by labels finds exactly this sandbox')
  const none = []
  for await (const s of daytona.list({ labels: { suite: 'nope' } })) {
    none.push(s.id)
  }
  check(none.length === 0, 'list by other labels finds nothing')

  // The simulator's admin API, with its own key, for this key's organization.
  const base = process.env.DAYTONA_API_URL.replace(/\/api\/?$/, '')
  const calls = async (headers) => fetch(base + '/_sim/calls', { headers })
  const refused = await calls({ Authorization: 'Bearer ' + process.env.DAYTONA_API_KEY })
  seen.adminWithApiKey = refused.status
  check(refused.status === 401, 'the admin API refuses an API key')
  const log = await calls({
    Authorization: 'Bearer ' + process.env.SANDPLANE_SIM_ADMIN_KEY,
    'X-Sim-Api-Key': process.env.DAYTONA_API_KEY,
  })
  check(log.status === 200, 'the admin API answers its key')
  const { counts } = await log.json()
  seen.adminCounts = counts
  check(counts.createSandbox === 1 && counts.toolbox >= 2, 'the call log shows this run')

  await sandbox.delete()
  seen.deleted = await gone(daytona, sandbox.id)
  seen.id = sandbox.id
}

async function resources(daytona) {
  // Snapshots: a record on the native backend, active after its pull.
  await daytona.snapshot.create({ name: 'ts-snap', image: 'python:3.12-slim' }, { timeout: 60 })
  const snap = await daytona.snapshot.get('ts-snap')
  seen.snapshot = snap.state
  check(snap.state === 'active', 'the snapshot becomes active')
  const snaps = await daytona.snapshot.list()
  check(snaps.items.some((s) => s.name === 'ts-snap') && snaps.total >= 2, 'the list holds it and the default')
  const fromSnap = await daytona.create({ snapshot: 'ts-snap' }, { timeout: 60 })
  check(fromSnap.state === 'started' && fromSnap.snapshot === 'ts-snap', 'a sandbox from the snapshot')

  // createSnapshot waits, from the events, until the sandbox leaves snapshotting.
  await fromSnap.createSnapshot('ts-saved')
  seen.afterSnapshot = fromSnap.state
  check(fromSnap.state === 'started', 'the sandbox is back to started')
  check((await daytona.snapshot.get('ts-saved')).name === 'ts-saved', 'the saved snapshot exists')

  // Pause freezes the sandbox; start resumes the same one.
  await fromSnap.pause()
  check(fromSnap.state === 'paused', 'pause waits until the sandbox is paused')
  await fromSnap.start()
  check(fromSnap.state === 'started', 'start resumes a paused sandbox')
  check((await fromSnap.process.executeCommand('echo resumed')).result.trim() === 'resumed', 'its toolbox answers again')

  // A fork is a new started sandbox from the same snapshot.
  const forked = await fromSnap.fork({ name: 'f' })
  check(forked.state === 'started' && forked.id !== fromSnap.id && forked.name === 'f', 'the fork is a new started sandbox')
  check(forked.snapshot === 'ts-snap', 'the fork has its source\'s snapshot')
  await forked.delete()

  // Network settings, SSH access, metrics, resize.
  await fromSnap.updateNetworkSettings({ networkBlockAll: true })
  await fromSnap.refreshData()
  check(fromSnap.networkBlockAll === true, 'the network settings are stored')
  const ssh = await fromSnap.createSshAccess(5)
  check((await fromSnap.validateSshAccess(ssh.token)).valid === true, 'the SSH token validates')
  await fromSnap.revokeSshAccess(ssh.token)
  check((await fromSnap.validateSshAccess(ssh.token)).valid === false, 'a revoked token does not')
  const metrics = await fromSnap.getMetrics()
  check(Array.isArray(metrics), 'metrics answer')
  await fromSnap.resize({ cpu: 2 })
  check(fromSnap.cpu === 2, 'resize changes the cpu')
  await fromSnap.delete()
  await daytona.snapshot.delete('ts-snap')
  await daytona.snapshot.delete('ts-saved')

  // A volume shared by two sandboxes, kept after both are gone.
  await daytona.volume.create('ts-vol')
  const vol = await eventually(async () => {
    const v = await daytona.volume.get('ts-vol')
    return v.state === 'ready' && v
  }, 'the volume is ready')
  const mount = [{ volumeId: vol.id, mountPath: '/home/daytona/vol' }]
  const a = await daytona.create({ volumes: mount }, { timeout: 60 })
  const b = await daytona.create({ volumes: mount }, { timeout: 60 })
  await a.process.executeCommand('echo shared-by-a > vol/note')
  const read = await b.process.executeCommand('cat vol/note')
  seen.volume = read.result
  check(read.result.trim() === 'shared-by-a', 'the second sandbox reads the first one\'s file')
  await a.delete()
  await b.delete()
  await gone(daytona, a.id)
  await gone(daytona, b.id)
  check((await daytona.volume.list()).some((v) => v.id === vol.id), 'the volume outlives its sandboxes')
  await daytona.volume.delete(vol)

  // A linked sandbox goes with its owner.
  const owner = await daytona.create({ name: 'ts-owner' }, { timeout: 60 })
  const follower = await daytona.create({ linkedSandbox: 'ts-owner' }, { timeout: 60 })
  await owner.delete()
  seen.linkedGone = await gone(daytona, follower.id)
}

async function dockerNetwork(daytona) {
  const url = process.env.OUTSIDE_URL
  const sandbox = await daytona.create({ networkBlockAll: true }, { timeout: 60 })
  const blocked = await sandbox.process.executeCommand('/toolbox fetch ' + url)
  seen.blocked = blocked
  check(blocked.exitCode !== 0, 'a sandbox created with networkBlockAll reaches nothing outside')
  await sandbox.updateNetworkSettings({ networkBlockAll: false })
  const open = await sandbox.process.executeCommand('/toolbox fetch ' + url)
  seen.open = open
  check(open.exitCode === 0 && open.result.includes('reached'), 'lifting the block opens the network')
  await sandbox.updateNetworkSettings({ networkBlockAll: true })
  const again = await sandbox.process.executeCommand('/toolbox fetch ' + url)
  check(again.exitCode !== 0, 'blocking a running sandbox cuts it off')
  await sandbox.delete()
}

// fileURLs drives the newest SDK's pre-signed file URLs with plain fetch,
// no API key: an upload (multipart, and a raw body as curl --data-binary
// sends it), downloads, a signature that opens nothing but what it signs,
// a rotated key that ends every URL signed before, a URL that never
// expires and one that does. seen.refused counts the requests the
// simulator had to refuse, which the Go test finds in its call log.
async function fileURLs(daytona) {
  const sandbox = await daytona.create({ labels: { suite: 'ts-sdk-file-urls' } }, { timeout: 60 })
  seen.refused = 0
  const refused = async (res, message, what) => {
    seen.refused++
    const body = await res.json()
    check(res.status === 401 && body.statusCode === 401 && body.code === 'UNAUTHORIZED', what + ' is refused with a 401 (' + JSON.stringify(body) + ')')
    check(body.message === message, what + ' says ' + message + ' (' + body.message + ')')
  }
  const text = 'hello through a signed URL\n'
  const binary = Buffer.from(Array.from({ length: 256 }, (_, i) => i))
  const home = await sandbox.getUserHomeDir()

  const upURL = await sandbox.uploadUrl('signed/hello.txt', 300)
  seen.uploadUrl = upURL.replace(/signature=[^&]+/, 'signature=…')
  check(upURL.startsWith(sandbox.toolboxProxyUrl + '/' + sandbox.id + '/files/upload-v2?'), 'the upload URL is the toolbox proxy\'s')
  const form = () => {
    const f = new FormData()
    f.append('file', new Blob([text]), 'hello.txt')
    return f
  }
  let res = await fetch(upURL, { method: 'POST', body: form() })
  check(res.status === 200, 'a multipart upload through the signed URL answers 200 (' + res.status + ')')
  const uploaded = await res.json()
  seen.uploaded = uploaded
  check(uploaded.name === 'hello.txt' && uploaded.path === 'signed/hello.txt' && uploaded.type === 'file', 'upload-v2 answers the UploadedFile')
  check((await sandbox.fs.downloadFile('signed/hello.txt')).toString() === text, 'the uploaded file is in the sandbox')

  const rawURL = await sandbox.uploadUrl(home + '/signed/raw.bin')
  res = await fetch(rawURL, { method: 'POST', body: binary, headers: { 'Content-Type': 'application/octet-stream' } })
  check(res.status === 200, 'a raw upload through the signed URL answers 200 (' + res.status + ')')
  check(Buffer.compare(await sandbox.fs.downloadFile(home + '/signed/raw.bin'), binary) === 0, 'every byte of the raw upload arrived')

  const downURL = await sandbox.downloadUrl('signed/hello.txt', 300)
  res = await fetch(downURL)
  check(res.status === 200 && (await res.text()) === text, 'the signed download answers the file')
  res = await fetch(await sandbox.downloadUrl(home + '/signed/raw.bin'))
  check(res.status === 200 && Buffer.compare(Buffer.from(await res.arrayBuffer()), binary) === 0, 'the signed download of a binary file')

  await refused(await fetch(downURL.replace('hello.txt', 'raw.bin')), 'invalid signature', 'another path than signed')
  await refused(await fetch(downURL, { method: 'POST', body: form() }), 'Invalid credentials', 'a POST to the download URL')

  await sandbox.rotateSigningKey()
  await refused(await fetch(downURL), 'invalid signature', 'a download signed with the rotated key')
  await refused(await fetch(upURL, { method: 'POST', body: form() }), 'invalid signature', 'an upload signed with the rotated key')
  res = await fetch(await sandbox.downloadUrl('signed/hello.txt', 300))
  check(res.status === 200 && (await res.text()) === text, 'a URL signed with the new key works')

  const forever = await sandbox.downloadUrl('signed/hello.txt', 0)
  check(/[?&]expires=0(&|$)/.test(forever), 'a ttl of 0 signs expires=0')
  res = await fetch(forever)
  check(res.status === 200, 'a URL that never expires works')

  const brief = await sandbox.downloadUrl('signed/hello.txt', 1)
  const expired = await eventually(async () => {
    const r = await fetch(brief)
    if (r.status === 200) {
      await r.arrayBuffer()
      return false
    }
    return r
  }, 'the one-second URL expires')
  await refused(expired, 'signature is expired', 'an expired URL')

  await sandbox.delete()
  seen.id = sandbox.id
}

// dockerBuild creates a sandbox and a snapshot from declarative images
// (Dockerfile content) on the docker backend, reading the build logs as
// they stream, then runs what was built. BASE_IMAGE is an image the engine
// has, since no registry is reachable.
async function dockerBuild(daytona) {
  const base = process.env.BASE_IMAGE
  const logs = []
  const sandbox = await daytona.create(
    { image: Image.base(base).runCommands('echo built-by-sdk > /built.txt') },
    { timeout: 180, onSnapshotCreateLogs: (line) => logs.push(line) },
  )
  seen.sandboxLogs = logs
  check(logs.join('\n').includes('echo built-by-sdk'), 'the sandbox build logs stream the RUN step')
  const built = await sandbox.process.executeCommand('cat /built.txt')
  check(built.result.trim() === 'built-by-sdk', 'the sandbox runs the built image')
  await sandbox.delete()

  const snapLogs = []
  const snap = await daytona.snapshot.create(
    { name: 'ts-built', image: Image.base(base).runCommands('echo snapshot-by-sdk > /snap.txt') },
    { timeout: 180, onLogs: (line) => snapLogs.push(line) },
  )
  seen.snapshotLogs = snapLogs
  check(snap.state === 'active', 'the snapshot is active')
  check(snapLogs.join('\n').includes('echo snapshot-by-sdk'), 'the snapshot build logs stream the RUN step')
  const fromSnap = await daytona.create({ snapshot: 'ts-built' }, { timeout: 60 })
  const out = await fromSnap.process.executeCommand('cat /snap.txt')
  check(out.result.trim() === 'snapshot-by-sdk', 'a sandbox of the snapshot runs its image')
  await fromSnap.delete()
  await daytona.snapshot.delete(snap)

  const failed = await failsWith(
    () => daytona.snapshot.create({ name: 'ts-broken', image: Image.base(base).runCommands('exit 3') }, { timeout: 180, onLogs: () => {} }),
    'a failing build',
  )
  seen.buildFailure = failed
  check(/build/i.test(failed), 'the failure says the build failed')
}

// nativeBuild: declarative images are refused on the native backend.
async function nativeBuild(daytona) {
  const err = await failsWith(
    () => daytona.create({ image: Image.debianSlim('3.12') }, { timeout: 60 }),
    'a declarative image on native',
  )
  seen.sandboxError = err
  check(/--backend docker/.test(err), 'refused, naming the fix')
  const snapErr = await failsWith(
    () => daytona.snapshot.create({ name: 'ts-native-built', image: Image.debianSlim('3.12') }),
    'a declarative snapshot on native',
  )
  seen.snapshotError = snapErr
  check(/--backend docker/.test(snapErr), 'the snapshot too')
}

// ttl drives the TTL of the newest SDK: ttlMinutes on create, the
// autoDestroyAt it shows on get and list, setTtl and its 0, then delete.
async function ttl(daytona) {
  const sandbox = await daytona.create({ labels: { suite: 'ts-ttl' }, ttlMinutes: 60 }, { timeout: 60 })
  seen.id = sandbox.id
  seen.created = sandbox.state
  seen.createdTTL = Boolean(sandbox.autoDestroyAt)
  const got = await daytona.get(sandbox.id)
  seen.gotTTL = got.autoDestroyAt === sandbox.autoDestroyAt
  const listed = []
  for await (const s of daytona.list({ labels: { suite: 'ts-ttl' } })) {
    listed.push(s)
  }
  seen.listed = listed.length
  seen.listedTTL = listed.length === 1 && listed[0].autoDestroyAt === sandbox.autoDestroyAt
  await sandbox.setTtl(0)
  await sandbox.refreshData()
  seen.clearedTTL = !sandbox.autoDestroyAt
  await sandbox.setTtl(30)
  await sandbox.refreshData()
  seen.resetTTL = Boolean(sandbox.autoDestroyAt)
  seen.refused = await failsWith(() => sandbox.setTtl(-1), 'a negative TTL')
  await sandbox.delete()
  await gone(daytona, sandbox.id)
}

// autopause drives the auto-pause of the newest SDK: autoPauseInterval on
// create (auto-stop then 0), setAutoPauseInterval and its 0, the server's
// refusal of auto-stop beside it, an idle pause seen through reads only,
// and a command that resumes the paused sandbox.
async function autopause(daytona) {
  const sandbox = await daytona.create({ labels: { suite: 'ts-autopause' }, autoPauseInterval: 1 }, { timeout: 60 })
  seen.id = sandbox.id
  seen.created = { autoPauseInterval: sandbox.autoPauseInterval, autoStopInterval: sandbox.autoStopInterval }
  await sandbox.setAutoPauseInterval(0)
  await sandbox.refreshData()
  seen.cleared = sandbox.autoPauseInterval
  await sandbox.setAutoPauseInterval(1)
  await sandbox.refreshData()
  seen.set = sandbox.autoPauseInterval
  seen.refusedLocally = await failsWith(() => sandbox.setAutoPauseInterval(-1), 'a negative auto-pause')
  seen.refusedBesideAutoStop = await failsWith(() => sandbox.setAutostopInterval(15), 'auto-stop beside auto-pause')
  seen.paused = await eventually(async () => {
    await sandbox.refreshData()
    return sandbox.state === 'paused' && sandbox.state
  }, 'the idle sandbox auto-pauses')
  const res = await sandbox.process.executeCommand('echo awake')
  seen.resumedBy = res.result.trim()
  await sandbox.delete()
  await gone(daytona, sandbox.id)
}

// entrypoint: every sandbox has its entrypoint session, Daytona's default
// (sleep infinity) or its snapshot's entrypoint, whose logs the SDK reads
// at once and follows over the WebSocket. Newest SDK only.
async function entrypoint(daytona) {
  const plain = await daytona.create({}, { timeout: 60 })
  const session = await plain.process.getEntrypointSession()
  check(session.sessionId === 'entrypoint' && session.commands.length === 1, 'the default sandbox has an entrypoint session')
  seen.defaultCommand = session.commands[0].command
  await plain.delete()

  const command = ['sh', '-c', 'echo entry-up; sleep 0.3; echo entry-warn >&2']
  await daytona.snapshot.create({ name: 'ts-entry', image: 'python:3.12-slim', entrypoint: command }, { timeout: 60 })
  const sandbox = await daytona.create({ snapshot: 'ts-entry' }, { timeout: 60 })
  seen.id = sandbox.id
  let out = ''
  let err = ''
  await sandbox.process.getEntrypointLogs(
    (chunk) => (out += chunk),
    (chunk) => (err += chunk),
  )
  seen.followed = { stdout: out, stderr: err }
  const logs = await sandbox.process.getEntrypointLogs()
  seen.logs = { stdout: logs.stdout, stderr: logs.stderr }
  const ended = await sandbox.process.getEntrypointSession()
  seen.entryCommand = ended.commands[0].command
  seen.exitCode = ended.commands[0].exitCode
  await sandbox.delete()
  await gone(daytona, sandbox.id)
  await daytona.snapshot.delete('ts-entry')
}

// fork: sandbox.fork copies the filesystem into a new started sandbox,
// the source keeps running, writes on either side stay there, and the
// API's lineage calls (through the SDK's own API client) answer. Newest
// SDK only.
async function fork(daytona) {
  const source = await daytona.create({ labels: { suite: 'ts-fork' } }, { timeout: 60 })
  seen.id = source.id
  await source.fs.uploadFile(Buffer.from('from the source\n'), 'kept.txt')
  const forked = await source.fork({ name: 'ts-forked' })
  await source.refreshData()
  seen.fork = { id: forked.id, name: forked.name, state: forked.state, sourceState: source.state }
  check(forked.id !== source.id, 'the fork has its own id')
  seen.copied = (await forked.fs.downloadFile('kept.txt')).toString()
  await forked.fs.uploadFile(Buffer.from('fork only\n'), 'fork.txt')
  await source.fs.uploadFile(Buffer.from('source only\n'), 'source.txt')
  seen.inSource = (await source.process.executeCommand('ls')).result.trim().split(/\s+/)
  seen.inFork = (await forked.process.executeCommand('ls')).result.trim().split(/\s+/)
  const grand = await forked.fork()
  const api = source.sandboxApi
  seen.forks = (await api.getSandboxForks(source.id)).data.map((s) => s.id)
  seen.parent = (await api.getSandboxParent(grand.id)).data.id
  seen.ancestors = (await api.getSandboxAncestors(grand.id)).data.map((s) => s.id)
  seen.lineage = { fork: forked.id, grand: grand.id }
  for (const s of [grand, forked, source]) {
    await s.delete()
    await gone(daytona, s.id)
  }
}

// pause: sandbox.pause waits until paused, and start resumes the same
// processes (a background counter goes on from where it stood). Newest
// SDK only.
async function pauseScenario(daytona) {
  const sandbox = await daytona.create({}, { timeout: 60 })
  seen.id = sandbox.id
  await sandbox.process.executeCommand('nohup sh -c "while true; do date +%s%N >> ticks; sleep 0.05; done" >/dev/null 2>&1 &')
  await sleep(300)
  await sandbox.pause()
  seen.paused = sandbox.state
  await sandbox.refreshData()
  seen.pausedOnGet = sandbox.state
  const ticks = async () => Number((await sandbox.fs.downloadFile('ticks')).toString().trim().split('\n').length)
  await sandbox.start()
  seen.started = sandbox.state
  const atResume = await ticks()
  await sleep(300)
  seen.ranOn = (await ticks()) > atResume
  await sandbox.delete()
  await gone(daytona, sandbox.id)
}

// expectClass runs f, which must throw, and reports the error's class
// checks: each name of want must hold by instanceof, and the fields the
// SDK read from the body.
async function expectClass(f, want, sdk) {
  try {
    await f()
  } catch (e) {
    const failed = want.filter((name) => !(e instanceof sdk[name]))
    return { ok: failed.length === 0, failed, name: e && e.name, statusCode: e.statusCode, code: e.code, source: e.source }
  }
  return { ok: false, failed: want, name: 'no error' }
}

// simAdmin calls the simulator's admin API for the script's organization.
async function simAdmin(method, path, body) {
  const base = process.env.DAYTONA_API_URL.replace(/\/api$/, '')
  const res = await fetch(base + path, {
    method,
    headers: {
      Authorization: 'Bearer ' + process.env.SANDPLANE_SIM_ADMIN_KEY,
      'X-Sim-Api-Key': process.env.DAYTONA_API_KEY,
      'Content-Type': 'application/json',
    },
    body: body && JSON.stringify(body),
  })
  check(res.ok, method + ' ' + path + ' answered ' + res.status)
}

// errors provokes each class the newest SDK makes of an error body, from
// the API (not found, conflict, validation, rate limit through an admin
// fault) and from the toolbox (command timeout, missing file, missing
// repository, missing session), and checks them by instanceof.
async function errors(daytona) {
  const sdk = require(process.env.SDK_PACKAGE)
  const sandbox = await daytona.create({ name: 'ts-errors', labels: { suite: 'ts-errors' } }, { timeout: 60 })
  seen.id = sandbox.id
  const classes = {}
  classes.notFound = await expectClass(() => daytona.get('no-such-sandbox'), ['DaytonaNotFoundError', 'DaytonaError'], sdk)
  classes.conflict = await expectClass(
    () => daytona.create({ name: 'ts-errors' }, { timeout: 60 }),
    ['DaytonaConflictError', 'DaytonaError'],
    sdk,
  )
  classes.validation = await expectClass(
    () => sandbox.setAutoPauseInterval(5),
    ['DaytonaValidationError', 'DaytonaBadRequestError'],
    sdk,
  )
  await simAdmin('POST', '/_sim/faults', { op: 'getSandbox', sandbox: sandbox.id, status: 429, retryAfter: 1, times: 1 })
  classes.rateLimit = await expectClass(() => daytona.get(sandbox.id), ['DaytonaRateLimitError'], sdk)
  classes.timeout = await expectClass(
    () => sandbox.process.executeCommand('sleep 5', undefined, undefined, 1),
    ['DaytonaProcessExecutionTimeoutError', 'DaytonaTimeoutError'],
    sdk,
  )
  classes.fileNotFound = await expectClass(
    () => sandbox.fs.downloadFile('no-such-file.txt'),
    ['DaytonaFileNotFoundError', 'DaytonaNotFoundError'],
    sdk,
  )
  classes.gitRepoNotFound = await expectClass(
    () => sandbox.git.clone('file:///no/such/repo.git', 'clone-here'),
    ['DaytonaGitRepoNotFoundError', 'DaytonaNotFoundError'],
    sdk,
  )
  classes.processNotFound = await expectClass(
    () => sandbox.process.getSession('no-such-session'),
    ['DaytonaProcessNotFoundError', 'DaytonaNotFoundError'],
    sdk,
  )
  seen.classes = classes
  seen.localRefusal = (await expectClass(() => sandbox.setAutoPauseInterval(-1), ['DaytonaInvalidArgumentError'], sdk)).ok
  await sandbox.delete()
  await gone(daytona, sandbox.id)
}

// secrets drives the newest SDK's organization secrets: create, get,
// list, update (a rotation), a conflict, then a sandbox created with
// secrets whose env holds only the placeholder and whose SEND_SCRIPT
// sends it to ALLOWED_HOST (the Go test checks what arrived), then
// updateSecrets({}) and the deletes. The value is SECRET_VALUE, then
// ROTATED_VALUE; no answer the SDK returns may hold either.
async function secretsScenario(daytona) {
  const values = [process.env.SECRET_VALUE, process.env.ROTATED_VALUE]
  const noValue = (what, x) => {
    const text = JSON.stringify(x)
    check(!values.some((v) => text.includes(v)), what + ' holds no value')
  }
  const secret = await daytona.secret.create({
    name: 'ts-api-key',
    value: values[0],
    description: 'for the ts scenario',
    hosts: [process.env.ALLOWED_HOST],
  })
  noValue('create', secret)
  seen.placeholder = secret.placeholder
  seen.hosts = secret.hosts
  const got = await daytona.secret.get(secret.id)
  noValue('get', got)
  seen.got = got.name
  const page = await daytona.secret.list({ limit: 50, name: 'ts-' })
  noValue('list', page)
  seen.listed = page.items.length
  seen.total = page.total
  const updated = await daytona.secret.update(secret.id, { value: values[1], description: 'rotated' })
  noValue('update', updated)
  seen.updatedDescription = updated.description
  seen.samePlaceholder = updated.placeholder === secret.placeholder
  seen.conflict = await failsWith(() => daytona.secret.create({ name: 'ts-api-key', value: 'another' }), 'a taken name')

  const sandbox = await daytona.create({ labels: { suite: 'ts-secrets' }, secrets: { API_KEY: 'ts-api-key' } }, { timeout: 60 })
  seen.id = sandbox.id
  seen.created = sandbox.state
  noValue('the sandbox', await daytona.get(sandbox.id).then((s) => ({ env: s.env, labels: s.labels, id: s.id })))
  const env = await sandbox.process.executeCommand('echo $API_KEY')
  seen.env = env.result.trim()
  const sent = await sandbox.process.executeCommand(process.env.SEND_SCRIPT, undefined, undefined, 30)
  seen.sent = sent.result.trim()
  await sandbox.updateSecrets({})
  seen.missingMount = await failsWith(() => sandbox.updateSecrets({ API_KEY: 'no-such-secret' }), 'an unknown secret')
  await sandbox.delete()
  await gone(daytona, sandbox.id)
  await daytona.secret.delete(secret.id)
  seen.deleted = await failsWith(() => daytona.secret.get(secret.id), 'a deleted secret')
}

// warmPools drives daytona.warmPool of the newest SDK against a simulator
// with a default pool (--warm-pool 1): list, create a pool of the default
// pool's snapshot, a create it serves at once, update, the refusals of a
// second pool and of a change to the default one, delete, and the taken
// sandbox still there after.
async function warmPools(daytona) {
  const listed = await daytona.warmPool.list()
  seen.listed = listed.length
  const def = listed.find((p) => p.organizationId === '00000000-0000-0000-0000-000000000000')
  check(def, 'the default pool is listed')
  seen.defaultPool = { id: def.id, snapshot: def.snapshot, pool: def.pool }

  const pool = await daytona.warmPool.create({ snapshot: def.snapshot, pool: 2 })
  seen.pool = pool.id
  seen.created = { pool: pool.pool, snapshot: pool.snapshot, target: pool.target, osUser: pool.osUser,
    env: pool.env, cpu: pool.cpu, mem: pool.mem, disk: pool.disk, errorReason: pool.errorReason }
  seen.ready = await eventually(async () => {
    const p = (await daytona.warmPool.list()).find((p) => p.id === pool.id)
    return p && p.currentSize === 2 && p.currentSize
  }, 'the pool is filled')

  const sandbox = await daytona.create({ snapshot: def.snapshot, labels: { suite: 'ts-warm-pools' } }, { timeout: 60 })
  seen.id = sandbox.id
  seen.sandboxState = sandbox.state
  seen.sandboxWarmPoolId = sandbox.warmPoolId === undefined ? 'absent' : sandbox.warmPoolId
  const exec = await sandbox.process.executeCommand('echo warm')
  seen.exec = exec.result.trim()

  seen.duplicate = await failsWith(() => daytona.warmPool.create({ snapshot: def.snapshot, pool: 1 }), 'a second pool')
  seen.defaultChange = await failsWith(() => daytona.warmPool.update(def.id, { pool: 3 }), 'a change to the default pool')

  const resized = await daytona.warmPool.update(pool.id, { pool: 1 })
  seen.resized = { pool: resized.pool, currentSize: resized.currentSize }
  await daytona.warmPool.delete(pool.id)
  seen.after = (await daytona.warmPool.list()).map((p) => p.id)
  seen.deletedAgain = await failsWith(() => daytona.warmPool.delete(pool.id), 'a deleted pool')

  const still = await daytona.get(sandbox.id)
  seen.kept = still.state
  await still.delete()
  await gone(daytona, sandbox.id)
}

async function main() {
  const daytona = new Daytona({
    apiKey: process.env.DAYTONA_API_KEY,
    apiUrl: process.env.DAYTONA_API_URL,
  })
  const scenario = process.env.SDK_SCENARIO || 'lifecycle'
  const run = {
    lifecycle,
    resources,
    'file-urls': fileURLs,
    ttl,
    autopause,
    errors,
    'docker-network': dockerNetwork,
    'docker-build': dockerBuild,
    'native-build': nativeBuild,
    secrets: secretsScenario,
    'warm-pools': warmPools,
    entrypoint,
    fork,
    pause: pauseScenario,
  }[scenario]
  check(run, 'a known scenario')
  await run(daytona)
  console.log(JSON.stringify({ ok: true, scenario, id: seen.id, seen }))
}

main().catch((err) => {
  console.error(err && err.stack ? err.stack : String(err))
  process.exit(1)
})
