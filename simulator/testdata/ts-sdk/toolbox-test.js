// Drives every toolbox feature of a sandbox through the official Daytona
// TypeScript SDK, unchanged, against `sandplane sim`: files, process
// execution, code-run in three languages, sessions, PTYs, git, LSP, the
// code interpreter and preview links. DAYTONA_API_URL and DAYTONA_API_KEY
// name the simulator; SDK_PACKAGE picks the SDK (@daytonaio/sdk, the pinned
// release, or sdk-latest, the newest). What releases after 0.190.1 added
// runs on those only, and is listed under "newer".
//
// Every step checks what it got and throws on any mismatch, so node exits
// non-zero. On success it prints one JSON line (the steps that ran) after
// its last call and never calls process.exit: the process must end by
// itself.
'use strict'

const fs = require('fs')
const os = require('os')
const path = require('path')
const { Readable } = require('stream')

const pkg = process.env.SDK_PACKAGE || '@daytonaio/sdk'
const { Daytona } = require(pkg)
const version = require(pkg + '/package.json').version
// The pinned release is 0.190.1; what later releases added runs on them only.
const laterSDK = Number(version.split('.')[1]) > 190

const ran = []
const newer = []
// What some steps saw, printed with the result for the log.
const seen = {}

function check(cond, what, got) {
  if (!cond) {
    throw new Error('check failed: ' + what + (got === undefined ? '' : ' (got ' + JSON.stringify(got) + ')'))
  }
}

function equal(got, want, what) {
  check(got === want, what + ': want ' + JSON.stringify(want), got)
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

// eventually retries f until it returns a truthy value, for up to 30 s.
async function eventually(f, what) {
  let last
  for (let i = 0; i < 150; i++) {
    try {
      const v = await f()
      if (v) return v
    } catch (e) {
      last = e
    }
    await sleep(200)
  }
  throw new Error('never: ' + what + (last ? ' (last error: ' + last.message + ')' : ''))
}

// failsWith runs f and returns the error it must throw.
async function failsWith(f, what) {
  try {
    await f()
  } catch (e) {
    return e
  }
  throw new Error(what + ' did not fail')
}

// step runs one named part, saying on stderr where a failure happened.
async function step(name, f, { newerOnly = false } = {}) {
  console.error('step: ' + name)
  try {
    await f()
  } catch (e) {
    throw new Error(name + ': ' + (e && e.message ? e.message : String(e)), { cause: e })
  }
  ran.push(name)
  if (newerOnly) newer.push(name)
}

// Local directories the run made, removed at its end.
const localDirs = []

function localTemp() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sdk-toolbox-'))
  localDirs.push(dir)
  return dir
}

// sh runs a command in the sandbox that must succeed, and returns its output.
async function sh(sandbox, command, cwd) {
  const r = await sandbox.process.executeCommand(command, cwd)
  check(r.exitCode === 0, 'command ' + JSON.stringify(command) + ' exits 0', r)
  return r.result
}

async function files(sandbox, wd) {
  const text = 'hello sandplane\n'
  const binary = Buffer.from(Array.from({ length: 256 }, (_, i) => i))
  await step('fs.createFolder', async () => {
    await sandbox.fs.createFolder('fs-test', '755')
    const info = await sandbox.fs.getFileDetails('fs-test')
    check(info.isDir === true && info.name === 'fs-test', 'the folder exists', info)
    equal((await sh(sandbox, 'stat -c %a fs-test')).trim(), '755', 'the folder mode')
  })
  await step('fs.uploadFile', async () => {
    await sandbox.fs.uploadFile(Buffer.from(text), 'fs-test/hello.txt')
    const local = path.join(localTemp(), 'local.txt')
    fs.writeFileSync(local, 'from a local file\n')
    await sandbox.fs.uploadFile(local, wd + '/fs-test/local.txt')
    equal(await sh(sandbox, 'cat fs-test/hello.txt fs-test/local.txt'), text + 'from a local file\n', 'the uploaded files')
  })
  await step('fs.uploadFiles', async () => {
    await sandbox.fs.uploadFiles([
      { source: Buffer.from('one\n'), destination: 'fs-test/bulk/one.txt' },
      { source: Buffer.from('two\n'), destination: 'fs-test/bulk/deeper/two.txt' },
      { source: binary, destination: 'fs-test/bulk/bin.dat' },
    ])
    equal(await sh(sandbox, 'cat fs-test/bulk/one.txt fs-test/bulk/deeper/two.txt'), 'one\ntwo\n', 'the bulk-uploaded files')
    equal((await sh(sandbox, 'od -An -tx1 -v fs-test/bulk/bin.dat | tr -d " \\n"')).length, 512, 'every byte of the binary file')
  })
  await step('fs.uploadFileStream', async () => {
    let sent = 0
    await sandbox.fs.uploadFileStream(Readable.from([Buffer.from('streamed '), Buffer.from('upload\n')]), 'fs-test/stream.txt', {
      onProgress: (p) => (sent = p.bytesSent),
    })
    equal(await sh(sandbox, 'cat fs-test/stream.txt'), 'streamed upload\n', 'the streamed file')
    equal(sent, 16, 'the upload progress')
  })
  await step('fs.downloadFile', async () => {
    const got = await sandbox.fs.downloadFile('fs-test/hello.txt')
    equal(got.toString(), text, 'the downloaded file')
    const bin = await sandbox.fs.downloadFile(wd + '/fs-test/bulk/bin.dat')
    check(Buffer.compare(bin, binary) === 0, 'binary bytes come back as they went', bin.length)
    const local = path.join(localTemp(), 'sub', 'down.txt')
    await sandbox.fs.downloadFile('fs-test/local.txt', local)
    equal(fs.readFileSync(local, 'utf8'), 'from a local file\n', 'the file downloaded to a local path')
    const missing = await failsWith(() => sandbox.fs.downloadFile('fs-test/nope.txt'), 'downloading a missing file')
    check(/not found|no such file|does not exist/i.test(missing.message), 'a missing file is reported as such', missing.message)
  })
  await step('fs.downloadFileStream', async () => {
    const stream = await sandbox.fs.downloadFileStream('fs-test/stream.txt')
    const chunks = []
    for await (const c of stream) chunks.push(Buffer.from(c))
    equal(Buffer.concat(chunks).toString(), 'streamed upload\n', 'the streamed download')
  })
  await step('fs.downloadFiles', async () => {
    const res = await sandbox.fs.downloadFiles([
      { source: 'fs-test/bulk/one.txt' },
      { source: 'fs-test/bulk/bin.dat' },
      { source: 'fs-test/missing.txt' },
    ])
    equal(res.length, 3, 'one answer per file')
    equal(res[0].source, 'fs-test/bulk/one.txt', 'answers keep the order asked')
    check(!res[0].error && Buffer.from(res[0].result).toString() === 'one\n', 'the first file', res[0])
    check(!res[1].error && Buffer.compare(Buffer.from(res[1].result), binary) === 0, 'the binary file', res[1].error)
    check(res[2].error && res[2].result === undefined, 'the missing file has an error and no data', res[2])
  })
  await step('fs.listFiles', async () => {
    const list = await sandbox.fs.listFiles('fs-test')
    const byName = Object.fromEntries(list.map((f) => [f.name, f]))
    check(['hello.txt', 'local.txt', 'stream.txt', 'bulk'].every((n) => byName[n]), 'the entries', list.map((f) => f.name))
    equal(list.length, 4, 'only the direct entries')
    equal(byName['hello.txt'].size, text.length, 'the size of hello.txt')
    check(byName.bulk.isDir && !byName['hello.txt'].isDir, 'isDir', byName.bulk)
    check(byName['hello.txt'].modTime && byName['hello.txt'].owner, 'modTime and owner', byName['hello.txt'])
    const modified = Date.parse(byName['hello.txt'].modifiedAt)
    check(Math.abs(modified - Date.now()) < 10 * 60 * 1000, 'modifiedAt is an ISO 8601 time of this run', byName['hello.txt'].modifiedAt)
  })
  if (laterSDK) {
    await step(
      'fs.listFiles depth',
      async () => {
        const tree = await sandbox.fs.listFiles('fs-test', { depth: 3 })
        const paths = tree.map((f) => f.path).sort()
        for (const p of ['fs-test/bulk', 'fs-test/bulk/deeper', 'fs-test/bulk/deeper/two.txt', 'fs-test/bulk/one.txt', 'fs-test/hello.txt']) {
          check(paths.includes(wd + '/' + p), 'depth 3 lists ' + p + ' with its full path', paths)
        }
        const two = await sandbox.fs.listFiles('fs-test', { depth: 2 })
        check(!two.some((f) => f.name === 'two.txt'), 'depth 2 stops a level higher', two.map((f) => f.path))
        check(two.some((f) => f.path === wd + '/fs-test/bulk/one.txt'), 'depth 2 lists the children of fs-test/bulk', two.map((f) => f.path))
      },
      { newerOnly: true },
    )
  }
  await step('fs.getFileDetails', async () => {
    const info = await sandbox.fs.getFileDetails('fs-test/hello.txt')
    equal(info.name, 'hello.txt', 'the name')
    equal(info.size, text.length, 'the size')
    equal(info.isDir, false, 'isDir')
    const missing = await failsWith(() => sandbox.fs.getFileDetails('fs-test/nope'), 'details of a missing file')
    check(/not found|no such file|does not exist/i.test(missing.message), 'a missing file is reported as such', missing.message)
  })
  await step('fs.setFilePermissions', async () => {
    await sandbox.fs.setFilePermissions('fs-test/hello.txt', { mode: '600' })
    equal((await sh(sandbox, 'stat -c %a fs-test/hello.txt')).trim(), '600', 'the new mode')
    const info = await sandbox.fs.getFileDetails('fs-test/hello.txt')
    equal(info.permissions, '0600', 'the permissions the details report')
    equal(info.mode, '-rw-------', 'the mode the details report')
    const owner = (await sh(sandbox, 'id -un')).trim()
    const group = (await sh(sandbox, 'id -gn')).trim()
    await sandbox.fs.setFilePermissions('fs-test/hello.txt', { owner, group, mode: '644' })
    equal((await sh(sandbox, 'stat -c "%a %U %G" fs-test/hello.txt')).trim(), '644 ' + owner + ' ' + group, 'mode, owner and group')
  })
  await step('fs.moveFiles', async () => {
    await sandbox.fs.moveFiles('fs-test/local.txt', 'fs-test/moved.txt')
    equal(await sh(sandbox, 'cat fs-test/moved.txt'), 'from a local file\n', 'the moved file')
    await failsWith(() => sandbox.fs.getFileDetails('fs-test/local.txt'), 'details of the moved-away name')
  })
  await step('fs.findFiles', async () => {
    const matches = await sandbox.fs.findFiles('fs-test', 'sandplane')
    equal(matches.length, 1, 'one line matches')
    check(matches[0].file.endsWith('fs-test/hello.txt') && matches[0].line === 1 && matches[0].content.trim() === 'hello sandplane', 'the match', matches[0])
  })
  await step('fs.searchFiles', async () => {
    const res = await sandbox.fs.searchFiles('fs-test', '*.txt')
    const names = res.files.map((f) => path.basename(f)).sort()
    equal(names.join(' '), 'hello.txt moved.txt one.txt stream.txt two.txt', 'the .txt files, at any depth')
  })
  await step('fs.replaceInFiles', async () => {
    const res = await sandbox.fs.replaceInFiles(['fs-test/hello.txt', 'fs-test/moved.txt'], 'sandplane', 'daytona')
    equal(res.length, 2, 'one result per file')
    check(res.every((r) => r.success === true && !r.error), 'both succeed', res)
    equal(await sh(sandbox, 'cat fs-test/hello.txt'), 'hello daytona\n', 'the replaced text')
    equal(await sh(sandbox, 'cat fs-test/moved.txt'), 'from a local file\n', 'a file without the pattern is unchanged')
  })
  await step('fs.deleteFile', async () => {
    await sandbox.fs.deleteFile('fs-test/moved.txt')
    await failsWith(() => sandbox.fs.deleteFile('fs-test/bulk'), 'deleting a directory without recursive')
    equal(await sh(sandbox, 'test -d fs-test/bulk && echo kept'), 'kept\n', 'the directory is still there')
    await sandbox.fs.deleteFile('fs-test/bulk', true)
    const names = (await sandbox.fs.listFiles('fs-test')).map((f) => f.name).sort()
    equal(names.join(' '), 'hello.txt stream.txt', 'what is left')
  })
}

async function processes(sandbox, wd) {
  await step('process.executeCommand', async () => {
    const r = await sandbox.process.executeCommand('echo "$GREETING from $(pwd)"', wd + '/fs-test', { GREETING: 'hello' })
    equal(r.exitCode, 0, 'the exit code')
    equal(r.result, 'hello from ' + wd + '/fs-test\n', 'env and cwd')
    equal(r.artifacts.stdout, r.result, 'artifacts.stdout')
    const failing = await sandbox.process.executeCommand('echo out; echo err >&2; exit 3')
    equal(failing.exitCode, 3, 'a failing command\'s exit code')
    check(failing.result.includes('out') && failing.result.includes('err'), 'stdout and stderr both come back', failing.result)
  })
  await step('process.executeCommand bash', async () => {
    const r = await sandbox.process.executeCommand(
      'arr=(a b c); for i in "${!arr[@]}"; do printf "%s=%s " "$i" "${arr[$i]}"; done; [[ $((6 * 7)) -eq 42 ]] && echo ok; echo "${BASH_VERSION%%.*}" | grep -q "^[0-9]" && echo bash',
    )
    equal(r.result, '0=a 1=b 2=c ok\nbash\n', 'bash arrays, [[ ]] and arithmetic')
  })
  await step('process.executeCommand timeout', async () => {
    const e = await failsWith(() => sandbox.process.executeCommand('sleep 30', undefined, undefined, 1), 'a command past its timeout')
    seen.executeTimeout = e.message
    check(/timeout|timed out/i.test(e.message), 'the error says it timed out', e.message)
    const fast = await sandbox.process.executeCommand('echo in-time', undefined, undefined, 10)
    equal(fast.result, 'in-time\n', 'a command within its timeout')
  })
}

async function codeRuns(daytona, sandbox) {
  await step('process.codeRun python', async () => {
    const r = await sandbox.process.codeRun('import os, sys\nprint("py", sys.argv[1:], os.environ["CODE_VAR"])', {
      argv: ['a', 'b'],
      env: { CODE_VAR: 'from-env' },
    })
    equal(r.exitCode, 0, 'the exit code')
    equal(r.result, "py ['a', 'b'] from-env\n", 'argv and env')
    const failing = await sandbox.process.codeRun('raise ValueError("boom")')
    equal(failing.exitCode, 1, 'an exception\'s exit code')
    check(failing.result.includes('ValueError: boom'), 'the traceback comes back', failing.result)
  })
  const js = await daytona.create({ language: 'javascript' }, { timeout: 60 })
  try {
    await step('process.codeRun javascript', async () => {
      const r = await js.process.codeRun('console.log("js", 6 * 7, process.argv.slice(2).join(","), process.env.CODE_VAR)', {
        argv: ['x', 'y'],
        env: { CODE_VAR: 'js-env' },
      })
      equal(r.exitCode, 0, 'the exit code')
      equal(r.result, 'js 42 x,y js-env\n', 'argv and env')
      const failing = await js.process.codeRun('process.exit(5)')
      equal(failing.exitCode, 5, 'process.exit')
    })
  } finally {
    await js.delete()
  }
  const ts = await daytona.create({ language: 'typescript' }, { timeout: 60 })
  try {
    await step('process.codeRun typescript', async () => {
      const r = await ts.process.codeRun('const n: number = 6 * 7\nconst who: string = process.argv[2]\nconsole.log(`ts ${n} ${who}`)', {
        argv: ['typed'],
      })
      equal(r.exitCode, 0, 'the exit code')
      equal(r.result, 'ts 42 typed\n', 'the typed program runs')
      const failing = await ts.process.codeRun('const n: number = "not a number"\nconsole.log(n)')
      check(failing.exitCode !== 0, 'a type error fails the run', failing)
      check(/TS2322/.test(failing.result), 'the type error is reported', failing.result)
    })
  } finally {
    await ts.delete()
  }
}

// untilExit polls a session command until it has an exit code.
async function untilExit(sandbox, session, cmdId) {
  return eventually(async () => {
    const c = await sandbox.process.getSessionCommand(session, cmdId)
    return c.exitCode !== undefined && c.exitCode !== null && c
  }, 'command ' + cmdId + ' exits')
}

async function sessions(sandbox) {
  const id = 'sdk-session'
  await step('process.createSession', async () => {
    await sandbox.process.createSession(id)
    const s = await sandbox.process.getSession(id)
    equal(s.sessionId, id, 'the session')
    check(Array.isArray(s.commands) && s.commands.length === 0, 'no commands yet', s)
    check((await sandbox.process.listSessions()).some((x) => x.sessionId === id), 'the list holds it')
  })
  await step('process.executeSessionCommand sync', async () => {
    const r = await sandbox.process.executeSessionCommand(id, { command: 'export KEPT=state; cd /tmp; echo out; echo err >&2' })
    equal(r.exitCode, 0, 'the exit code')
    check(r.cmdId, 'a command id', r)
    equal(r.stdout, 'out\n', 'stdout')
    equal(r.stderr, 'err\n', 'stderr')
    const again = await sandbox.process.executeSessionCommand(id, { command: 'echo "$KEPT $(pwd)"; sh -c "exit 7"' })
    equal(again.stdout, 'state /tmp\n', 'the session keeps variables and directory')
    equal(again.exitCode, 7, 'a failing command\'s exit code')
    const logs = await sandbox.process.getSessionCommandLogs(id, r.cmdId)
    equal(logs.stdout, 'out\n', 'the logs\' stdout')
    equal(logs.stderr, 'err\n', 'the logs\' stderr')
  })
  await step('process.executeSessionCommand async and follow', async () => {
    const r = await sandbox.process.executeSessionCommand(id, {
      command: 'for i in 1 2 3; do echo line$i; echo e$i >&2; sleep 0.2; done',
      runAsync: true,
    })
    check(r.cmdId && (r.exitCode === undefined || r.exitCode === null), 'an async command answers at once, without an exit code', r)
    let out = ''
    let err = ''
    await sandbox.process.getSessionCommandLogs(id, r.cmdId, (c) => (out += c), (c) => (err += c))
    equal(out, 'line1\nline2\nline3\n', 'the followed stdout')
    equal(err, 'e1\ne2\ne3\n', 'the followed stderr')
    const c = await untilExit(sandbox, id, r.cmdId)
    equal(c.exitCode, 0, 'the async command\'s exit code')
    const s = await sandbox.process.getSession(id)
    check(s.commands.some((x) => x.id === r.cmdId && x.exitCode === 0), 'the session lists the command', s.commands)
  })
  await step('process.sendSessionCommandInput', async () => {
    const r = await sandbox.process.executeSessionCommand(id, { command: 'read -r name; echo "hello $name"', runAsync: true })
    await sandbox.process.sendSessionCommandInput(id, r.cmdId, 'sandplane\n')
    const c = await untilExit(sandbox, id, r.cmdId)
    equal(c.exitCode, 0, 'the command read its input and ended')
    const logs = await sandbox.process.getSessionCommandLogs(id, r.cmdId)
    check(logs.stdout.includes('hello sandplane\n'), 'the command saw the input', logs)
  })
  await step('process.deleteSession', async () => {
    const r = await sandbox.process.executeSessionCommand(id, { command: 'sleep 600', runAsync: true })
    await sandbox.process.deleteSession(id)
    await failsWith(() => sandbox.process.getSession(id), 'reading a deleted session')
    check(!(await sandbox.process.listSessions()).some((x) => x.sessionId === id), 'the list no longer holds it')
    equal((await sandbox.process.executeCommand('pgrep -f "^sleep 600$" || true')).result, '', 'the session\'s commands are gone')
    check(r.cmdId, 'the long command had started')
  })
}

async function ptys(sandbox, wd) {
  const decoder = new TextDecoder()
  let out = ''
  const pty = await sandbox.process.createPty({
    id: 'sdk-pty',
    cwd: wd + '/fs-test',
    envs: { PTY_VAR: 'pty-env' },
    cols: 80,
    rows: 24,
    onData: (d) => (out += decoder.decode(d, { stream: true })),
  })
  await step('process.createPty', async () => {
    check(pty.isConnected(), 'the handle is connected')
    await pty.sendInput('echo "$PTY_VAR $((40 + 2)) $(pwd)"\n')
    await eventually(() => out.includes('pty-env 42 ' + wd + '/fs-test'), 'the PTY runs the input with its env and cwd: ' + JSON.stringify(out))
    const info = await sandbox.process.getPtySessionInfo('sdk-pty')
    check(info.id === 'sdk-pty' && info.active === true, 'the session is active', info)
    check((await sandbox.process.listPtySessions()).some((s) => s.id === 'sdk-pty'), 'the list holds it')
  })
  await step('process.resizePty', async () => {
    const info = await pty.resize(120, 40)
    check(info.cols === 120 && info.rows === 40, 'resize answers the new size', info)
    out = ''
    await pty.sendInput('stty size\n')
    await eventually(() => out.includes('40 120'), 'the terminal has the new size: ' + JSON.stringify(out))
  })
  await step('process.pty wait', async () => {
    await pty.sendInput('exit 3\n')
    const res = await pty.wait()
    equal(res.exitCode, 3, 'the shell\'s exit code')
    equal(pty.exitCode, 3, 'the handle\'s exit code')
  })
  await step('process.connectPty', async () => {
    const first = await sandbox.process.createPty({ id: 'sdk-pty-kill', onData: () => {} })
    await first.sendInput('KEEP=kept-across-connections\n')
    await first.disconnect()
    let again = ''
    const second = await sandbox.process.connectPty('sdk-pty-kill', { onData: (d) => (again += decoder.decode(d)) })
    await second.sendInput('echo "$KEEP"\n')
    await eventually(() => again.includes('kept-across-connections\r\n'), 'the same shell answers a new connection: ' + JSON.stringify(again))
    await second.disconnect()
  })
  await step('process.pty kill', async () => {
    const other = await sandbox.process.connectPty('sdk-pty-kill', { onData: () => {} })
    await other.kill()
    const res = await other.wait()
    seen.ptyKill = res
    check(res.exitCode !== 0 || res.error, 'a killed PTY does not end cleanly', res)
    await eventually(async () => {
      try {
        const info = await sandbox.process.getPtySessionInfo('sdk-pty-kill')
        return info.active === false
      } catch (e) {
        return true
      }
    }, 'the killed PTY is gone')
  })
}

async function git(sandbox, wd, withNewer) {
  const origin = wd + '/git-fixture/origin.git'
  const author = ['SDK Test', 'sdk@example.com']
  // The fixture: a bare repository with one commit on main, made with the
  // sandbox's own git, and a second clone that plays another developer.
  await sh(
    sandbox,
    'set -e; rm -rf git-fixture; mkdir git-fixture; cd git-fixture; git init -q --bare -b main origin.git; ' +
      'git clone -q origin.git other 2>/dev/null; cd other; git config user.name Other; git config user.email other@example.com; ' +
      'git checkout -q -b main; echo v1 > README.md; git add README.md; git commit -qm init; git push -q origin main',
  )
  await step('git.clone', async () => {
    await sandbox.git.clone('file://' + origin, 'repo')
    equal(await sh(sandbox, 'cat repo/README.md'), 'v1\n', 'the cloned file')
    const st = await sandbox.git.status('repo')
    equal(st.currentBranch, 'main', 'the current branch')
    equal(st.fileStatus.length, 0, 'a clean tree')
    check(st.branchPublished === true && st.ahead === 0 && st.behind === 0, 'in sync with its upstream', st)
  })
  await step('git.branches', async () => {
    equal((await sandbox.git.branches('repo')).branches.join(' '), 'main', 'the local branches')
    await sandbox.git.createBranch('repo', 'feature')
    equal((await sandbox.git.branches('repo')).branches.sort().join(' '), 'feature main', 'the new branch is listed')
    await sandbox.git.checkoutBranch('repo', 'main')
    equal((await sandbox.git.status('repo')).currentBranch, 'main', 'checkout main')
    await sandbox.git.checkoutBranch('repo', 'feature')
    equal((await sandbox.git.status('repo')).currentBranch, 'feature', 'checkout feature')
    await sandbox.git.createBranch('repo', 'scratch')
    await sandbox.git.checkoutBranch('repo', 'feature')
    await sandbox.git.deleteBranch('repo', 'scratch')
    equal((await sandbox.git.branches('repo')).branches.sort().join(' '), 'feature main', 'the deleted branch is gone')
    await failsWith(() => sandbox.git.checkoutBranch('repo', 'no-such-branch'), 'checking out a missing branch')
  })
  let sha
  await step('git.add and commit', async () => {
    await sandbox.fs.uploadFile(Buffer.from('feature\n'), 'repo/feature.txt')
    let st = await sandbox.git.status('repo')
    check(st.fileStatus.some((f) => f.name === 'feature.txt' && f.worktree === 'Untracked'), 'an untracked file', st.fileStatus)
    await sandbox.git.add('repo', ['feature.txt'])
    st = await sandbox.git.status('repo')
    check(st.fileStatus.some((f) => f.name === 'feature.txt' && f.staging === 'Added'), 'a staged file', st.fileStatus)
    const c = await sandbox.git.commit('repo', 'add feature', author[0], author[1])
    sha = c.sha
    check(/^[0-9a-f]{40}$/.test(sha), 'the commit hash', c)
    equal((await sh(sandbox, 'git log -1 --format="%H %an <%ae> %s"', wd + '/repo')).trim(), sha + ' SDK Test <sdk@example.com> add feature', 'the commit')
    equal((await sandbox.git.status('repo')).fileStatus.length, 0, 'a clean tree after the commit')
    const empty = await failsWith(() => sandbox.git.commit('repo', 'nothing', author[0], author[1]), 'committing nothing')
    check(/nothing to commit|empty commit/i.test(empty.message), 'an empty commit says why', empty.message)
    const allowed = await sandbox.git.commit('repo', 'empty on purpose', author[0], author[1], true)
    check(allowed.sha !== sha, 'allowEmpty commits anyway', allowed)
    sha = allowed.sha
  })
  await step('git.push', async () => {
    await sandbox.git.push('repo')
    equal((await sh(sandbox, 'git --git-dir=' + origin + ' rev-parse feature')).trim(), sha, 'the remote has the branch')
    const st = await sandbox.git.status('repo')
    check(st.branchPublished === true && st.ahead === 0, 'the branch is published', st)
  })
  await step('git.pull', async () => {
    await sh(sandbox, 'set -e; git pull -q origin main; echo v2 > README.md; git commit -qam v2; git push -q origin main', wd + '/git-fixture/other')
    await sandbox.git.checkoutBranch('repo', 'main')
    await sh(sandbox, 'git fetch -q', wd + '/repo')
    check((await sandbox.git.status('repo')).behind === 1, 'main is one behind after a fetch')
    await sandbox.git.pull('repo')
    equal(await sh(sandbox, 'cat repo/README.md'), 'v2\n', 'the pulled change')
    const st = await sandbox.git.status('repo')
    check(st.behind === 0 && st.ahead === 0, 'in sync again', st)
  })
  if (!withNewer) return
  await step(
    'git.clone depth',
    async () => {
      await sandbox.git.clone('file://' + origin, 'shallow', 'main', undefined, undefined, undefined, undefined, 1)
      equal((await sh(sandbox, 'git rev-list --count HEAD', wd + '/shallow')).trim(), '1', 'one commit in a depth-1 clone')
      equal(await sh(sandbox, 'cat shallow/README.md'), 'v2\n', 'the newest content')
      const st = await sandbox.git.status('shallow')
      check(st.detached === false && st.upstream === 'origin/main', 'status says the branch and its upstream', st)
    },
    { newerOnly: true },
  )
  await step(
    'git.push branch',
    async () => {
      await sandbox.git.createBranch('shallow', 'topic')
      await sandbox.fs.uploadFile(Buffer.from('topic\n'), 'shallow/topic.txt')
      await sandbox.git.add('shallow', ['.'])
      const c = await sandbox.git.commit('shallow', 'topic', author[0], author[1])
      await sandbox.git.push('shallow', undefined, undefined, 'topic', 'origin', true)
      equal((await sh(sandbox, 'git --git-dir=' + origin + ' rev-parse topic')).trim(), c.sha, 'the named branch reached the remote')
      const st = await sandbox.git.status('shallow')
      check(st.branchPublished === true && st.upstream === 'origin/topic', 'setUpstream records the upstream', st)
      equal((await sandbox.git.branches('shallow')).current, 'topic', 'the current branch the list reports')
    },
    { newerOnly: true },
  )
  await step(
    'git.pull branch',
    async () => {
      await sh(sandbox, 'set -e; echo v3 > README.md; git commit -qam v3; git push -q origin main', wd + '/git-fixture/other')
      // A branch without an upstream pulls what it names.
      await sandbox.git.createBranch('repo', 'follow')
      await sandbox.git.pull('repo', undefined, undefined, 'main', 'origin')
      equal(await sh(sandbox, 'cat repo/README.md'), 'v3\n', 'origin\'s main, fast-forwarded into follow')
    },
    { newerOnly: true },
  )
  await step(
    'git.init and remotes',
    async () => {
      await sandbox.git.init('fresh', false, 'trunk')
      equal((await sandbox.git.status('fresh')).currentBranch, 'trunk', 'the initial branch')
      equal((await sandbox.git.remotes('fresh')).remotes.length, 0, 'no remotes yet')
      await sandbox.git.remoteAdd('fresh', 'origin', 'file:///nowhere.git')
      await failsWith(() => sandbox.git.remoteAdd('fresh', 'origin', 'file://' + origin), 'adding a remote that exists')
      await sandbox.git.remoteAdd('fresh', 'origin', 'file://' + origin, true, true)
      equal(await sandbox.git.remoteGet('fresh', 'origin'), 'file://' + origin, 'overwrite replaced the URL')
      const list = await sandbox.git.remotes('fresh')
      check(list.remotes.length === 1 && list.remotes[0].name === 'origin', 'one remote', list)
      equal((await sh(sandbox, 'git rev-parse origin/main', wd + '/fresh')).trim(), (await sh(sandbox, 'git --git-dir=' + origin + ' rev-parse main')).trim(), 'fetch fetched')
      await sandbox.git.init('fresh-bare.git', true)
      equal((await sh(sandbox, 'git rev-parse --is-bare-repository', wd + '/fresh-bare.git')).trim(), 'true', 'a bare repository')
    },
    { newerOnly: true },
  )
  await step(
    'git.config',
    async () => {
      check((await sandbox.git.getConfig('sdk.unset', 'local', 'fresh')) == null, 'a key that is not set has no value')
      await sandbox.git.setConfig('sdk.value', 'local value', 'local', 'fresh')
      equal(await sandbox.git.getConfig('sdk.value', 'local', 'fresh'), 'local value', 'a local value')
      equal((await sh(sandbox, 'git config --local sdk.value', wd + '/fresh')).trim(), 'local value', 'in the repository\'s config')
      await sandbox.git.configureUser('SDK User', 'user@example.com', 'local', 'fresh')
      equal((await sh(sandbox, 'git config user.name; git config user.email', wd + '/fresh')), 'SDK User\nuser@example.com\n', 'the user')
    },
    { newerOnly: true },
  )
  await step(
    'git.reset and restore',
    async () => {
      await sh(sandbox, 'git checkout -q -b work origin/main', wd + '/fresh')
      await sandbox.fs.uploadFile(Buffer.from('changed\n'), 'fresh/README.md')
      await sandbox.git.add('fresh', ['README.md'])
      await sandbox.git.reset('fresh', undefined, undefined, ['README.md'])
      let st = await sandbox.git.status('fresh')
      check(st.fileStatus.length === 1 && st.fileStatus[0].staging === 'Unmodified' && st.fileStatus[0].worktree === 'Modified', 'reset unstaged the file', st.fileStatus)
      await sandbox.git.restore('fresh', ['README.md'])
      equal((await sandbox.git.status('fresh')).fileStatus.length, 0, 'restore brought the file back')
      equal(await sh(sandbox, 'cat fresh/README.md'), 'v3\n', 'the committed content')
      const head = (await sh(sandbox, 'git rev-parse HEAD~1', wd + '/fresh')).trim()
      await sandbox.git.reset('fresh', 'hard', 'HEAD~1')
      equal((await sh(sandbox, 'git rev-parse HEAD', wd + '/fresh')).trim(), head, 'a hard reset moved the branch')
      equal(await sh(sandbox, 'cat fresh/README.md'), 'v2\n', 'and the working tree')
    },
    { newerOnly: true },
  )
  await step(
    'git.status detached',
    async () => {
      await sh(sandbox, 'git checkout -q --detach HEAD~1', wd + '/repo')
      const st = await sandbox.git.status('repo')
      check(st.detached === true && st.currentBranch === 'HEAD', 'a detached HEAD', st)
      const list = await sandbox.git.branches('repo')
      check(!list.current, 'no current branch when detached', list)
    },
    { newerOnly: true },
  )
}

async function lsp(sandbox, wd) {
  await step('lsp python', async () => {
    const dir = wd + '/lsp-py'
    await sandbox.fs.uploadFile(
      Buffer.from('import os\n\n\ndef greet(name):\n    return "hi " + name\n\n\nclass Greeter:\n    def hello(self):\n        return greet("x")\n\n\nos.pa\n'),
      dir + '/app.py',
    )
    const server = await sandbox.createLspServer('python', dir)
    await server.start()
    await server.didOpen(dir + '/app.py')
    const symbols = await server.documentSymbols(dir + '/app.py')
    const names = symbols.map((s) => s.name)
    check(names.includes('greet') && names.includes('Greeter'), 'the document symbols', names)
    check(symbols.every((s) => s.location && s.location.uri === 'file://' + dir + '/app.py'), 'symbols point into the file', symbols[0])
    const items = await eventually(async () => {
      const list = await server.completions(dir + '/app.py', { line: 12, character: 5 })
      return list.items.some((i) => i.label === 'path') && list.items
    }, 'os.pa completes to path')
    check(items.every((i) => typeof i.label === 'string'), 'completion items have labels')
    await server.stop()
  })
  await step('lsp typescript', async () => {
    const dir = wd + '/lsp-ts'
    await sandbox.fs.uploadFile(Buffer.from('{"compilerOptions":{"strict":true,"target":"es2020"}}\n'), dir + '/tsconfig.json')
    await sandbox.fs.uploadFile(
      Buffer.from('export function add(a: number, b: number): number {\n  return a + b\n}\n\nexport class Calc {\n  total = 0\n}\n\nconst word = "abc"\nword.\n'),
      dir + '/index.ts',
    )
    const server = await sandbox.createLspServer('typescript', dir)
    await server.start()
    await server.didOpen(dir + '/index.ts')
    const names = (await server.documentSymbols(dir + '/index.ts')).map((s) => s.name)
    check(names.includes('add') && names.includes('Calc'), 'the document symbols', names)
    await eventually(async () => {
      const list = await server.completions(dir + '/index.ts', { line: 9, character: 5 })
      return list.items.some((i) => i.label === 'toUpperCase')
    }, 'word. completes to string methods')
    await server.stop()
  })
}

async function interpreter(sandbox, wd) {
  await step('codeInterpreter', async () => {
    const ctx = await sandbox.codeInterpreter.createContext(wd + '/fs-test')
    check(ctx.id && ctx.language === 'python' && ctx.cwd === wd + '/fs-test', 'the new context', ctx)
    check((await sandbox.codeInterpreter.listContexts()).some((c) => c.id === ctx.id), 'the list holds it')

    const streamed = []
    const first = await sandbox.codeInterpreter.runCode('x = 40\nprint("first")\nimport os\nprint(os.getcwd())', {
      context: ctx,
      onStdout: (m) => streamed.push(m.output),
    })
    equal(first.stdout, 'first\n' + wd + '/fs-test\n', 'stdout, in the context\'s directory')
    equal(streamed.join(''), first.stdout, 'the stdout callback saw it all')
    check(!first.error, 'no error', first.error)

    const errs = []
    const second = await sandbox.codeInterpreter.runCode('import sys\nprint(x + 2)\nprint("warn", file=sys.stderr)', {
      context: ctx,
      onStdout: () => {},
      onStderr: (m) => errs.push(m.output),
    })
    equal(second.stdout, '42\n', 'state is kept across runs')
    equal(second.stderr, 'warn\n', 'stderr')
    equal(errs.join(''), 'warn\n', 'the stderr callback')

    let reported
    const failing = await sandbox.codeInterpreter.runCode('print("before")\n1 / 0', { context: ctx, onError: (e) => (reported = e) })
    equal(failing.stdout, 'before\n', 'output before the error')
    check(failing.error && failing.error.name === 'ZeroDivisionError' && /division by zero/.test(failing.error.value), 'the error', failing.error)
    check(/ZeroDivisionError/.test(failing.error.traceback), 'the traceback', failing.error.traceback)
    check(reported && reported.name === 'ZeroDivisionError', 'the onError callback', reported)

    const isolated = await sandbox.codeInterpreter.runCode('print(x)')
    check(isolated.error && isolated.error.name === 'NameError', 'the default context does not see this one\'s state', isolated)
    const env = await sandbox.codeInterpreter.runCode('import os\nprint(os.environ["RUN_VAR"])', { envs: { RUN_VAR: 'run-env' } })
    equal(env.stdout, 'run-env\n', 'envs')
    const slow = await failsWith(() => sandbox.codeInterpreter.runCode('import time\ntime.sleep(30)', { timeout: 1 }), 'a run past its timeout')
    seen.interpreterTimeout = slow.message
    check(/timed out|timeout/i.test(slow.message), 'the timeout is reported', slow.message)

    await sandbox.codeInterpreter.deleteContext(ctx)
    check(!(await sandbox.codeInterpreter.listContexts()).some((c) => c.id === ctx.id), 'the deleted context is gone')
  })
}

async function preview(sandbox, wd) {
  await step('getPreviewLink', async () => {
    await sandbox.fs.uploadFile(Buffer.from('preview-ok\n'), 'site/index.html')
    const port = Number(
      (await sh(sandbox, 'python3 -c \'import socket; s=socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])\'')).trim(),
    )
    await sandbox.process.createSession('web')
    await sandbox.process.executeSessionCommand('web', {
      command: 'python3 -m http.server ' + port + ' --directory ' + wd + '/site',
      runAsync: true,
    })
    await eventually(async () => {
      const r = await sandbox.process.executeCommand('python3 -c \'import socket; socket.create_connection(("127.0.0.1", ' + port + '))\'')
      return r.exitCode === 0
    }, 'the sandbox\'s server listens')
    const link = await sandbox.getPreviewLink(port)
    check(link.url && link.token, 'a url and a token', link)
    const res = await fetch(link.url + '/index.html', { headers: { 'X-Daytona-Preview-Token': link.token } })
    equal(res.status, 200, 'the sandbox\'s server answers through the preview link')
    equal(await res.text(), 'preview-ok\n', 'the page')
    const anonymous = await fetch(link.url + '/index.html')
    check(anonymous.status !== 200, 'without the token the link does not answer', anonymous.status)
    const signed = await sandbox.getSignedPreviewUrl(port, 60)
    const viaSigned = await fetch(signed.url + '/index.html')
    equal(viaSigned.status, 200, 'a signed preview URL needs no header')
    equal(await viaSigned.text(), 'preview-ok\n', 'the page through the signed URL')
    await sandbox.process.deleteSession('web')
  })
}

// later runs what releases after 0.190.1 added to the sandbox itself:
// its process environment, its current metrics, stored git credentials.
async function later(sandbox) {
  await step('sandbox.updateEnv', async () => {
    await sandbox.updateEnv({ SANDPLANE_SDK_ENV: 'from-sdk', SANDPLANE_SDK_GONE: 'soon' })
    equal(await sh(sandbox, 'echo "$SANDPLANE_SDK_ENV|$SANDPLANE_SDK_GONE"'), 'from-sdk|soon\n', 'commands inherit the set variables')
    await sandbox.updateEnv({}, { unset: ['SANDPLANE_SDK_GONE'] })
    equal(await sh(sandbox, 'echo "$SANDPLANE_SDK_ENV|$SANDPLANE_SDK_GONE"'), 'from-sdk|\n', 'an unset variable is gone')
  }, { newerOnly: true })
  await step('sandbox.getMetricsLatest', async () => {
    const m = await sandbox.getMetricsLatest()
    check(m.cpuCount >= 1, 'a CPU count', m)
    check(m.cpuUsedPct >= 0 && m.cpuUsedPct <= 100, 'a CPU percentage', m)
    check(m.memTotal > 0 && m.memUsed <= m.memTotal, 'memory in bytes', m)
    check(m.diskTotal > 0 && m.diskUsed <= m.diskTotal, 'disk in bytes', m)
    check(m.timestamp instanceof Date && !isNaN(m.timestamp), 'a timestamp', m)
  }, { newerOnly: true })
  await step('git.dangerouslyAuthenticate', async () => {
    await sandbox.git.dangerouslyAuthenticate('sdk-user', 'sdk-token', 'git.example.com')
    const out = await sh(sandbox, "printf 'protocol=https\\nhost=git.example.com\\n\\n' | git credential fill")
    check(out.includes('username=sdk-user') && out.includes('password=sdk-token'), 'git finds the stored credentials', out)
  }, { newerOnly: true })
}

async function main() {
  const daytona = new Daytona({ apiKey: process.env.DAYTONA_API_KEY, apiUrl: process.env.DAYTONA_API_URL })
  const sandbox = await daytona.create({ labels: { suite: 'ts-sdk-toolbox' } }, { timeout: 60 })
  try {
    const wd = await sandbox.getWorkDir()
    check(wd && wd.startsWith('/'), 'an absolute work dir', wd)
    await files(sandbox, wd)
    await processes(sandbox, wd)
    await codeRuns(daytona, sandbox)
    await sessions(sandbox)
    await ptys(sandbox, wd)
    await git(sandbox, wd, laterSDK)
    await lsp(sandbox, wd)
    await interpreter(sandbox, wd)
    await preview(sandbox, wd)
    if (laterSDK) await later(sandbox)
  } finally {
    await sandbox.delete()
    for (const dir of localDirs) fs.rmSync(dir, { recursive: true, force: true })
  }
  console.log(JSON.stringify({ ok: true, version, ran, newer, seen }))
}

main().catch((err) => {
  console.error(err && err.stack ? err.stack : String(err))
  for (let c = err && err.cause; c; c = c.cause) console.error('caused by:', c.stack || c.message || c)
  process.exit(1)
})
