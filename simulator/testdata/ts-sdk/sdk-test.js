// Drives the simulator with the official Daytona TypeScript SDK, unchanged.
// DAYTONA_API_URL and DAYTONA_API_KEY name the simulator. Prints one JSON
// line of observations; exits non-zero on the first failed check.
'use strict'

const { Daytona } = require('@daytonaio/sdk')

const seen = {}

function check(cond, what) {
  if (!cond) {
    throw new Error('check failed: ' + what + ' (seen so far: ' + JSON.stringify(seen) + ')')
  }
}

async function main() {
  const daytona = new Daytona({
    apiKey: process.env.DAYTONA_API_KEY,
    apiUrl: process.env.DAYTONA_API_URL,
  })

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
  let gone = false
  try {
    await daytona.get(sandbox.id)
    for (let i = 0; i < 100 && !gone; i++) {
      await new Promise((r) => setTimeout(r, 50))
      try {
        await daytona.get(sandbox.id)
      } catch (e) {
        gone = true
      }
    }
  } catch (e) {
    gone = true
  }
  seen.deleted = gone
  check(gone, 'the sandbox is gone after delete')

  console.log(JSON.stringify({ ok: true, id: sandbox.id, seen }))
}

main().catch((err) => {
  console.error(err && err.stack ? err.stack : String(err))
  process.exit(1)
})
