package simulator

import (
	"net/http"
	"strconv"
	"time"

	"github.com/sandplane/sandplane/simulator/internal/cost"
)

// Prices are per-second list prices. Running sandboxes pay for CPU, memory
// and disk; stopped ones for disk only.
type Prices = cost.Prices

// SandboxCost is one sandbox's share of a CostReport.
type SandboxCost = cost.SandboxCost

// CostReport is what the run would have cost on Daytona. The totals cover
// every sandbox of the run; Sandboxes lists the live ones and the last
// deleted ones (Config.CostHistory) in creation order, one page of them
// when the report was asked for with a limit.
type CostReport = cost.Report

// billingOf says what a raw state costs: compute is allocated from the
// moment the runner creates the container until it is stopped or
// destroyed; a stopped sandbox keeps its disk; an archived one lives in
// object storage, which the simulator does not charge.
func billingOf(state string) cost.Billing {
	switch state {
	// A paused sandbox keeps its memory, so its compute stays allocated.
	case stCreating, stStarting, stStarted, stStopping, stRestoring, stDestroying,
		stPausing, stPaused, stResuming:
		return cost.Running
	case stStopped, stArchiving, stError:
		return cost.Stopped
	}
	return cost.None
}

// enterBilling settles sb's ledger and bills its new raw state.
func enterBilling(l *cost.Ledger, now time.Time, state string) {
	l.Enter(now, billingOf(state), state == stDestroyed)
}

// Cost reports the running and stopped seconds of every sandbox so far,
// the warm pools' unclaimed ones in rows of their own (SandboxCost.WarmPool), priced with p (the configured prices when p is zero).
func (s *Simulator) Cost(p Prices) CostReport {
	rep, _ := s.cost(p, everyOrg, "", 0)
	return rep
}

// cost is Cost for the sandboxes of sc, their rows from after the cursor
// on, at most limit of them (every one for 0).
func (s *Simulator) cost(p Prices, sc scope, after string, limit int) (CostReport, *apiError) {
	if p == (Prices{}) {
		p = s.cfg.Prices
	}
	var from uint64
	if after != "" {
		n, err := strconv.ParseUint(after, 10, 64)
		if err != nil {
			return CostReport{}, errorf(http.StatusBadRequest, "invalid cursor %q: pass the nextCursor of the previous page", after)
		}
		from = n + 1
	}
	// The default pool's sandboxes are the simulator's, not a caller's:
	// only the report of every organization has them. An organization's
	// own pools are billed to it.
	owns := func(org string) bool { return (sc.all || org != warmPoolOrg) && sc.owns(org) }
	now := s.clk.Now()
	rep := CostReport{Prices: p, Sandboxes: []SandboxCost{}}
	s.mu.RLock()
	defer s.mu.RUnlock()
	s.costs.Totals(&rep, owns, now)
	rep.Sandboxes, rep.NextCursor = s.costs.Page(p, owns, now, from, limit)
	return rep, nil
}
