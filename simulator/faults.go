package simulator

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/sandplane/sandplane/simulator/internal/faults"
)

// Fault scripts the outcome of the requests it matches. The zero fields do
// nothing, so a fault can combine a delay with a status, or a vanish with a
// normal answer. Its Op is an operationId of the API, "toolbox" for
// toolbox requests, "preview" for preview traffic, "*" for all of those,
// or "webhook" for webhook deliveries (drop, duplicate, delay).
type Fault = faults.Fault

// RandomFaults injects faults at random, reproducibly for a given seed.
type RandomFaults = faults.Random

// Duration is a time.Duration that reads and writes JSON as "1.5s"; a bare
// number means milliseconds.
type Duration = faults.Duration

// faultOps are the ops a fault may name: the API's operationIds, and the
// toolbox and preview traffic; "*" is every one.
var faultOps = sync.OnceValue(func() faults.Ops {
	ops := faults.Ops{"*": true, "toolbox": true, "preview": true, faults.OpWebhook: true}
	for _, rt := range apiRoutes() {
		ops[rt.op] = true
	}
	return ops
})

// throttlerScope is the name of the rate limit Daytona applies to op.
func throttlerScope(op string) string {
	switch op {
	case "createSandbox":
		return "sandbox-create"
	case "startSandbox", "stopSandbox", "deleteSandbox", "archiveSandbox", "recoverSandbox",
		"pauseSandbox", "resizeSandbox", "createBackup":
		return "sandbox-lifecycle"
	}
	return "authenticated"
}

// faultError is the answer a fault's status gives.
func faultError(op string, ft Fault) *apiError {
	e := &apiError{Status: ft.Status, Message: ft.Message, Header: http.Header{}}
	if e.Message == "" {
		switch {
		case ft.Status == http.StatusTooManyRequests:
			e.Message = msgThrottled
		case ft.Status >= 500:
			e.Message = msgUnexpected
		default:
			e.Message = http.StatusText(ft.Status)
		}
	}
	if ft.Status == http.StatusTooManyRequests {
		retry := ft.RetryAfter
		if retry <= 0 {
			retry = 1
		}
		name := throttlerScope(op)
		e.Header.Set("X-RateLimit-Limit-"+name, "100")
		e.Header.Set("X-RateLimit-Remaining-"+name, "0")
		e.Header.Set("X-RateLimit-Reset-"+name, strconv.Itoa(retry))
		e.Header.Set("Retry-After", strconv.Itoa(retry))
	}
	return e
}

// AddFault adds a scripted fault and returns it with its ID. A fault with
// no Org applies to every organization.
func (s *Simulator) AddFault(f Fault) Fault { return s.faults.Add(f) }

// SetRandomFaults turns seeded random faults on for every organization, or
// off with nil.
func (s *Simulator) SetRandomFaults(r *RandomFaults) { s.faults.SetRandom("", r) }

// ClearFaults removes every scripted and random fault.
func (s *Simulator) ClearFaults() { s.faults.Clear(everyOrg.owns) }

func durationOf(d Duration) time.Duration { return time.Duration(d) }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x != "" && x == s {
			return true
		}
	}
	return false
}
