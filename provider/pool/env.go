package pool

import (
	"os"
	"strconv"
	"time"

	"github.com/sandplane/sandplane/provider"
)

// The environment variables that override the pool's timers and its warm
// cap. They win over the defaults; an option the host's code passes to New
// wins over them. Each is documented in the README's table with its default
// and what 0 means.
const (
	// EnvAutoStop is the auto-stop interval of the sandboxes the pool
	// creates, in whole minutes (WithAutoStop); 0 disables auto-stop.
	EnvAutoStop = "DAYTONA_AUTOSTOP"
	// EnvAutoDelete is their auto-delete interval after they stop, in whole
	// minutes (WithAutoDelete); 0 deletes a sandbox as soon as it stops.
	EnvAutoDelete = "DAYTONA_AUTODELETE"
	// EnvKeepWarm is the keep-warm window, a Go duration ("2m", "90s")
	// (WithKeepWarm); 0 turns park-to-running off.
	EnvKeepWarm = "SANDPLANE_POOL_KEEP_WARM"
	// EnvWarmCap is the warm cap, a count (WithWarmCap); 0 means nothing
	// parks running.
	EnvWarmCap = "SANDPLANE_POOL_WARM_CAP"
	// EnvMaxLease bounds a lease's activity refresh, a Go duration
	// (WithMaxLease); 0 is refused.
	EnvMaxLease = "SANDPLANE_POOL_MAX_LEASE"
)

// WithEnv reads the environment variables above through lookup rather than
// os.LookupEnv; nil reads none. Default os.LookupEnv.
func WithEnv(lookup func(string) (string, bool)) Option {
	return func(o *config) { o.lookup, o.envSet = lookup, true }
}

// applyEnv sets what the environment overrides. invalid_argument names a
// variable that does not parse.
func (c *config) applyEnv() error {
	lookup := c.lookup
	if !c.envSet {
		lookup = os.LookupEnv
	}
	if lookup == nil {
		return nil
	}
	for _, v := range []struct {
		name string
		set  func(string) bool
		want string
	}{
		{EnvAutoStop, setInt(&c.autoStop), "a whole number of minutes, 0 or more"},
		{EnvAutoDelete, setInt(&c.autoDelete), "a whole number of minutes, 0 or more"},
		{EnvKeepWarm, setDuration(&c.keepWarm, 0), "a Go duration (2m, 90s), 0 or more"},
		{EnvWarmCap, setInt(&c.warmCap), "a count, 0 or more"},
		{EnvMaxLease, setDuration(&c.maxLease, 1), "a positive Go duration (1h, 90m)"},
	} {
		s, ok := lookup(v.name)
		if !ok || s == "" {
			continue
		}
		if !v.set(s) {
			return provider.Errorf(provider.InvalidArgument, "pool: %s=%q: want %s", v.name, s, v.want)
		}
	}
	return nil
}

// setInt parses a count of 0 or more into dst, reporting whether it did.
func setInt(dst *int) func(string) bool {
	return func(s string) bool {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return false
		}
		*dst = n
		return true
	}
}

// setDuration parses a Go duration of at least least into dst, reporting
// whether it did.
func setDuration(dst *time.Duration, least time.Duration) func(string) bool {
	return func(s string) bool {
		d, err := time.ParseDuration(s)
		if err != nil || d < least {
			return false
		}
		*dst = d
		return true
	}
}
