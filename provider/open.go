package provider

import (
	"context"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
)

// EnvProvider selects the provider when Open is given "".
const EnvProvider = "SANDBOX_PROVIDER"

// Opener makes a Provider from a URL such as local:// or daytona://. It reads
// whatever else it needs from the environment, like the official SDKs do.
type Opener func(ctx context.Context, u *url.URL) (Provider, error)

var (
	openersMu sync.RWMutex
	openers   = map[string]Opener{}
)

// Register makes a provider available to Open under scheme. Backends call
// it from init, so a host server links the ones it wants with a blank
// import, as with database/sql drivers:
//
//	import _ "github.com/sandplane/sandplane/local"
func Register(scheme string, o Opener) {
	openersMu.Lock()
	defer openersMu.Unlock()
	if _, dup := openers[scheme]; dup {
		panic("provider: Register called twice for " + scheme)
	}
	openers[scheme] = o
}

// Unregister removes the provider registered under scheme, if any: for a
// test that registers a fake of its own and must leave the registry as it
// found it, for the tests after it (and its own next run, under -count).
func Unregister(scheme string) {
	openersMu.Lock()
	defer openersMu.Unlock()
	delete(openers, scheme)
}

// Open returns the provider rawURL names: "local://" (the daemon at
// AGENT_CONTROL_PLANE_URL), "local://127.0.0.1:4025", "daytona://" (with
// DAYTONA_API_KEY, DAYTONA_API_URL, DAYTONA_TARGET)... An empty rawURL means
// $SANDBOX_PROVIDER, and "local://" when that is unset too.
// invalid_argument: an unknown or malformed URL, naming the known schemes.
func Open(ctx context.Context, rawURL string) (Provider, error) {
	if rawURL == "" {
		rawURL = os.Getenv(EnvProvider)
	}
	if rawURL == "" {
		rawURL = "local://"
	}
	if !strings.Contains(rawURL, "://") {
		rawURL += "://" // "local" and "daytona" are fine as settings too
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, Errorf(InvalidArgument, "provider URL %q: %v", rawURL, err)
	}
	openersMu.RLock()
	o, ok := openers[u.Scheme]
	openersMu.RUnlock()
	if !ok {
		return nil, Errorf(InvalidArgument, "unknown provider %q: set %s to one of %s (and import its package)", u.Scheme, EnvProvider, strings.Join(Schemes(), ", "))
	}
	return o(ctx, u)
}

// Schemes lists the registered provider schemes, sorted.
func Schemes() []string {
	openersMu.RLock()
	defer openersMu.RUnlock()
	var out []string
	for s := range openers {
		out = append(out, s+"://")
	}
	sort.Strings(out)
	return out
}
