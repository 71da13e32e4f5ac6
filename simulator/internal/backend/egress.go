package backend

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"

	"github.com/sandplane/sandplane/local/driver"

	"github.com/sandplane/sandplane/simulator/internal/secrets"
)

// Egress is what a workload needs to send its outbound HTTP(S) through the
// simulator's secrets proxy.
type Egress struct {
	// Placeholders are the env vars of the sandbox's secrets, each holding
	// its secret's placeholder, never a value.
	Placeholders map[string]string
	// ProxyURL is the proxy with the sandbox's own credentials in it: a
	// credential, redacted from the workload's output as env values are.
	ProxyURL string
	// CACert is the PEM of the CA the proxy signs intercepted hosts with.
	CACert []byte
}

// EgressBackend is implemented by backends that can give a workload an
// Egress. EgressProxy says whether this one can: its workloads reach the
// proxy on the simulator's loopback. A backend without it, or answering
// false, cannot run a sandbox with secrets.
type EgressBackend interface {
	EgressProxy() bool
}

// EgressProxy: native workloads on the host's network reach its loopback;
// an isolated one (bwrap, a network of its own) does not, nor does a
// container's bridge.
func (b *runtimeBackend) EgressProxy() bool {
	hn, ok := b.cfg.Runtime.(driver.HostNetwork)
	return b.native() && (!ok || hn.SharesHostNetwork(driver.Spec{}))
}

// egressCAFile is where, in the sandbox's directory (outside its home),
// the workload finds the roots it trusts: the host's with the proxy's CA.
const egressCAFile = "egress-ca.pem"

// hostRoots are where distributions keep the system's CA bundle, the
// first found being the one the CA file starts with: SSL_CERT_FILE and
// its kin replace a client's roots, so the tunnelled hosts must still
// verify against the usual ones.
var hostRoots = []string{
	"/etc/ssl/certs/ca-certificates.crt",
	"/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/cert.pem",
	"/etc/ssl/ca-bundle.pem",
}

// egressEnv writes the CA file into dir and returns the env the workload's
// processes get for e: its placeholders and the proxy variables.
func egressEnv(dir string, e *Egress) (map[string]string, error) {
	bundle := []byte{}
	for _, p := range hostRoots {
		if b, err := os.ReadFile(p); err == nil {
			bundle = append(b, '\n')
			break
		}
	}
	path := filepath.Join(dir, egressCAFile)
	if err := os.WriteFile(path, append(bundle, e.CACert...), 0o644); err != nil {
		return nil, fmt.Errorf("write the egress proxy's CA into the sandbox: %w", err)
	}
	env := secrets.ProxyEnv(e.ProxyURL, path)
	maps.Copy(env, e.Placeholders)
	return env, nil
}

// addEgress puts e's env on top of spec's, the sandbox's own env
// included, so that the proxy it names is the one in force. A backend
// whose workloads cannot reach the proxy refuses, rather than start a
// sandbox whose secrets would silently not work.
func (b *runtimeBackend) addEgress(spec *driver.Spec, dir string, e *Egress) error {
	if e == nil {
		return nil
	}
	if !b.EgressProxy() {
		return fmt.Errorf("the %s backend cannot reach the simulator's secrets proxy: run the simulator with --backend native to use secrets", b.Name())
	}
	env, err := egressEnv(dir, e)
	if err != nil {
		return err
	}
	maps.Copy(spec.Env, env)
	return nil
}
