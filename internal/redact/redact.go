package redact

import (
	"sort"
	"strings"
)

// MinLen keeps Env from shredding output over values such as "1" or "on",
// which are not secrets.
const MinLen = 4

// Env returns a function that hides every value of env at least MinLen
// bytes long as [REDACTED]. Longer values go first, so that a value that
// holds another is hidden whole.
func Env(env map[string]string) func(string) string {
	var secrets []string
	for _, v := range env {
		if len(v) >= MinLen {
			secrets = append(secrets, v)
		}
	}
	if len(secrets) == 0 {
		return func(s string) string { return s }
	}
	sort.Slice(secrets, func(i, j int) bool { return len(secrets[i]) > len(secrets[j]) })
	pairs := make([]string, 0, 2*len(secrets))
	for _, s := range secrets {
		pairs = append(pairs, s, "[REDACTED]")
	}
	return strings.NewReplacer(pairs...).Replace
}
