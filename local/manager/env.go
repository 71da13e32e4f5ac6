package manager

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
