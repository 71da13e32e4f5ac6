package launcher

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/sandplane/sandplane/local/driver"
	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
)

// Readiness says when a launched workload counts as up. The zero value is
// ReadyPort; a sandbox's default is ReadyHTTP("/"), since a port that
// accepts does not prove the workload behind it answers (Docker's proxy and
// bubblewrap's forwarder accept for it).
type Readiness struct {
	mode readyMode
	path string
}

type readyMode int

const (
	modePort readyMode = iota
	modeNone
	modeHTTP
)

var (
	// ReadyPort waits until the workload accepts connections on its port,
	// or, on a driver that implements driver.Prober (Docker, whose proxy
	// accepts before the container does), until the driver says it holds
	// one: for a workload that does not speak HTTP.
	ReadyPort = Readiness{mode: modePort}
	// ReadyNone counts a started workload as up.
	ReadyNone = Readiness{mode: modeNone}
)

// ReadyHTTP waits until the workload answers GET path on its port with any
// HTTP response, whatever the driver: only the workload writes one, never a
// proxy or forwarder in front of it.
func ReadyHTTP(path string) Readiness { return Readiness{mode: modeHTTP, path: path} }

// String is the readiness as a snapshot words it: "port", "none", or
// "http" with its path.
func (r Readiness) String() string {
	switch r.mode {
	case modeNone:
		return "none"
	case modeHTTP:
		return "http " + r.path
	}
	return "port"
}

// probeTimeout bounds one readiness check.
const probeTimeout = time.Second

// maxProbeBackoff caps the wait between readiness checks. A check that
// finds nothing costs microseconds (a refused connect, a memory read), and
// whatever the cap is, a launch pays on average half of it after the
// workload is up: a millisecond keeps that small against a start-up of
// ten or more.
const maxProbeBackoff = time.Millisecond

// probeClient asks HTTP readiness; no keep-alive, so that no connection to a
// workload outlives its check.
var probeClient = &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}

// waitReady polls until the workload behind h is up as r says, it exits,
// or ReadyTimeout passes. A refused connect costs microseconds: polling
// often keeps a launch close to the workload's own start-up time. Its exit
// is learnt from the driver's Wait, once, not asked at every poll (an
// engine inspect, for docker).
func (l *Launcher) waitReady(ctx context.Context, h driver.Handle, addr netip.AddrPort, r Readiness) error {
	port := int(addr.Port())
	if r.mode == modeNone {
		return nil
	}
	deadline := l.cfg.Clock.NewTimer(l.cfg.ReadyTimeout)
	defer deadline.Stop()
	exited, stopWatching := l.watchExit(ctx, h)
	defer stopWatching()
	backoff := 500 * time.Microsecond
	for {
		ready, err := l.ready(ctx, h, addr, r)
		if err != nil {
			return err
		}
		if ready {
			return nil
		}
		t := l.cfg.Clock.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-deadline.C():
			t.Stop()
			return &NotReadyError{Port: port, Timeout: l.cfg.ReadyTimeout, ready: r}
		case e := <-exited:
			t.Stop()
			if e.err != nil {
				return e.err
			}
			return &NotReadyError{Port: port, Exited: true, Reason: e.exit.Reason, ready: r}
		case <-t.C():
		}
		if backoff < maxProbeBackoff {
			backoff *= 2
		}
	}
}

type exitResult struct {
	exit driver.Exit
	err  error
}

// watchExit runs the driver's Wait for h until stop, and sends its result,
// if it came first, on the channel.
func (l *Launcher) watchExit(ctx context.Context, h driver.Handle) (<-chan exitResult, func()) {
	ctx, cancel := context.WithCancel(ctx)
	ch := make(chan exitResult, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		exit, err := l.cfg.Driver.Wait(ctx, h)
		if ctx.Err() == nil {
			ch <- exitResult{exit, err}
		}
	}()
	return ch, func() { cancel(); <-done }
}

// ready checks once whether the workload is up.
func (l *Launcher) ready(ctx context.Context, h driver.Handle, addr netip.AddrPort, r Readiness) (bool, error) {
	switch {
	case r.mode == modeHTTP:
		return l.answers(ctx, "http://"+addr.String()+r.path), nil
	case l.prober() != nil:
		return l.prober().Probe(ctx, h, addr)
	}
	c, err := net.DialTimeout("tcp", addr.String(), probeTimeout)
	if err != nil {
		return false, nil
	}
	c.Close()
	return true, nil
}

func (l *Launcher) prober() driver.Prober {
	p, _ := l.cfg.Driver.(driver.Prober)
	return p
}

// answers reports whether url gives any HTTP response within probeTimeout.
func (l *Launcher) answers(ctx context.Context, url string) bool {
	ctx, cancel := clock.WithTimeout(ctx, l.cfg.Clock, probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := probeClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return true
}

// NotReadyError is why a started workload did not come up: it ended first
// (Exited), or ReadyTimeout passed. Launch returns it inside its
// create_failed error, whose message is its Error; a host that words the
// failure its own way finds it with errors.As.
type NotReadyError struct {
	// Port is the port the workload was to serve on.
	Port int
	// Exited says that the workload ended before it was ready, and Reason
	// how (driver.Exit.Reason).
	Exited bool
	Reason string
	// Timeout is the ReadyTimeout that passed, when it did not end.
	Timeout time.Duration
	// Output is the end of what it wrote, stderr when it wrote any, with
	// secret values redacted; "" when it wrote nothing or the request had
	// no Redact.
	Output string

	ready Readiness
}

func (e *NotReadyError) Error() string {
	did, do, check := "listened", "listen", "it must listen on $PORT"
	if e.ready.mode == modeHTTP {
		did, do = "answered HTTP", "answer HTTP"
		check = "it must answer HTTP on $PORT, or declare ready: port in its snapshot if it speaks something else"
	}
	if e.Exited {
		return fmt.Sprintf("workload ended before it %s on port %d (%s)%s", did, e.Port, e.Reason, outputSuffix(e.Output))
	}
	return fmt.Sprintf("workload did not %s on port %d within %s: %s%s", do, e.Port, e.Timeout, check, outputSuffix(e.Output))
}

// code is the error code of a launch that did not come up: create_failed
// for a workload that ended (its command is at fault), unavailable for
// one still running but not answering (it may yet, on a less loaded
// machine: a retry can succeed).
func (e *NotReadyError) code() provider.ErrorCode {
	if e.Exited {
		return provider.CreateFailed
	}
	return provider.Unavailable
}

// maxTail bounds the workload output an error quotes.
const maxTail = 2048

// Tail is the end of a workload's output for an error message, stderr
// when it wrote any, with secret values redacted: "; workload output: ...",
// or "" when it wrote nothing.
func Tail(redact func(string) string, stdout, stderr []byte) string {
	return outputSuffix(lastOutput(redact, stdout, stderr))
}

// lastOutput is the end of stderr, or of stdout when stderr is empty, at
// most maxTail bytes, redacted.
func lastOutput(redact func(string) string, stdout, stderr []byte) string {
	out := strings.TrimSpace(string(stderr))
	if out == "" {
		out = strings.TrimSpace(string(stdout))
	}
	if out == "" {
		return ""
	}
	if len(out) > maxTail {
		out = "..." + out[len(out)-maxTail:]
	}
	return redact(out)
}

// outputSuffix quotes output at the end of an error message.
func outputSuffix(output string) string {
	if output == "" {
		return ""
	}
	return "; workload output: " + output
}
