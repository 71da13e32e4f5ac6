package manager

import (
	"sort"
	"strings"
)

// sandboxEnv merges a sandbox's persisted environment. Precedence, lowest
// first: the snapshot's env, the daemon's pass-through values (only for keys
// the request lacks), the request's envVars.
func sandboxEnv(snapshot, pass, request map[string]string) map[string]string {
	env := cloneMap(snapshot)
	for k, v := range pass {
		if _, ok := request[k]; !ok {
			env[k] = v
		}
	}
	for k, v := range request {
		env[k] = v
	}
	return env
}

// spawnEnv is what a workload actually gets: base, then the sandbox env.
// The launcher adds PORT and PORT_<port>, which only the daemon may set.
func spawnEnv(base, sandbox map[string]string) map[string]string {
	env := cloneMap(base)
	for k, v := range sandbox {
		env[k] = v
	}
	return env
}

// minSecretLen keeps redaction from shredding logs over values such as "1"
// or "true", which are not secrets.
const minSecretLen = 4

const redacted = "[REDACTED]"

// newRedactor returns a function that hides every env value of at least
// minSecretLen characters. Longer values are replaced first so that a value
// containing another is hidden whole.
func newRedactor(env map[string]string) func(string) string {
	var secrets []string
	for _, v := range env {
		if len(v) >= minSecretLen {
			secrets = append(secrets, v)
		}
	}
	if len(secrets) == 0 {
		return func(s string) string { return s }
	}
	sort.Slice(secrets, func(i, j int) bool { return len(secrets[i]) > len(secrets[j]) })
	pairs := make([]string, 0, 2*len(secrets))
	for _, s := range secrets {
		pairs = append(pairs, s, redacted)
	}
	return strings.NewReplacer(pairs...).Replace
}
