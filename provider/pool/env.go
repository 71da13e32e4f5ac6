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
	minutes := func(name string, dst *int) error {
		v, ok := lookup(name)
		if !ok || v == "" {
			return nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return provider.Errorf(provider.InvalidArgument, "pool: %s=%q: want a whole number of minutes, 0 or more", name, v)
		}
		*dst = n
		return nil
	}
	duration := func(name string, dst *time.Duration) error {
		v, ok := lookup(name)
		if !ok || v == "" {
			return nil
		}
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return provider.Errorf(provider.InvalidArgument, "pool: %s=%q: want a Go duration (2m, 90s), 0 or more", name, v)
		}
		*dst = d
		return nil
	}
	if err := minutes(EnvAutoStop, &c.autoStop); err != nil {
		return err
	}
	if err := minutes(EnvAutoDelete, &c.autoDelete); err != nil {
		return err
	}
	if err := duration(EnvKeepWarm, &c.keepWarm); err != nil {
		return err
	}
	if v, ok := lookup(EnvWarmCap); ok && v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return provider.Errorf(provider.InvalidArgument, "pool: %s=%q: want a count, 0 or more", EnvWarmCap, v)
		}
		c.warmCap = n
	}
	if v, ok := lookup(EnvMaxLease); ok && v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return provider.Errorf(provider.InvalidArgument, "pool: %s=%q: want a positive Go duration (1h, 90m)", EnvMaxLease, v)
		}
		c.maxLease = d
	}
	return nil
}
