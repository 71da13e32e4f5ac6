package simulator

import (
	"net/http"
	"strconv"
	"time"
)

// billing says what a raw state costs: compute is allocated from the moment
// the runner creates the container until it is stopped or destroyed; a
// stopped sandbox keeps its disk; an archived one lives in object storage,
// which the simulator does not charge.
type billing int

const (
	billNone billing = iota
	billRunning
	billStopped
)

func billingOf(state string) billing {
	switch state {
	case stCreating, stStarting, stStarted, stStopping, stRestoring, stDestroying:
		return billRunning
	case stStopped, stArchiving, stError:
		return billStopped
	}
	return billNone
}

// ledger accumulates one sandbox's billed seconds. It outlives the sandbox,
// so the cost report covers deleted ones too: in a row of its own among the
// last Config.CostHistory deleted, then in its organization's sums.
type ledger struct {
	ID, OrgID, Name string
	CPU, Memory     int
	Disk            int
	running         time.Duration
	stopped         time.Duration
	since           time.Time
	current         billing

	// seq orders the report's rows (creation order) and is its cursor.
	seq    uint64
	book   *costBook
	closed bool
}

// enter settles the seconds so far and bills state from now on. A destroyed
// sandbox's ledger closes: it never changes again.
func (l *ledger) enter(now time.Time, state string) {
	if l == nil || l.closed {
		return
	}
	l.settle(now)
	l.current = billingOf(state)
	if state == stDestroyed && l.book != nil {
		l.book.close(l)
	}
}

func (l *ledger) settle(now time.Time) {
	d := now.Sub(l.since)
	if d > 0 {
		switch l.current {
		case billRunning:
			l.running += d
		case billStopped:
			l.stopped += d
		}
	}
	l.since = now
}

// totals returns the seconds up to now without settling.
func (l *ledger) totals(now time.Time) (running, stopped time.Duration) {
	running, stopped = l.running, l.stopped
	d := now.Sub(l.since)
	if d > 0 {
		switch l.current {
		case billRunning:
			running += d
		case billStopped:
			stopped += d
		}
	}
	return running, stopped
}

// SandboxCost is one sandbox's share of a CostReport.
type SandboxCost struct {
	ID             string  `json:"id"`
	OrganizationID string  `json:"organizationId"`
	Name           string  `json:"name"`
	RunningSeconds float64 `json:"runningSeconds"`
	StoppedSeconds float64 `json:"stoppedSeconds"`
	Cost           float64 `json:"cost"`
}

// CostReport is what the run would have cost on Daytona. The totals cover
// every sandbox of the run; Sandboxes lists the live ones and the last
// deleted ones (Config.CostHistory) in creation order, one page of them
// when the report was asked for with a limit.
type CostReport struct {
	Prices         Prices        `json:"prices"`
	RunningSeconds float64       `json:"runningSeconds"`
	StoppedSeconds float64       `json:"stoppedSeconds"`
	Cost           float64       `json:"cost"`
	Sandboxes      []SandboxCost `json:"sandboxes"`
	// Pruned counts the deleted sandboxes in the totals without a row.
	Pruned int `json:"pruned,omitempty"`
	// NextCursor, on a page, asks for the next one (cursor=...); absent on
	// the last.
	NextCursor string `json:"nextCursor,omitempty"`
}

func (p Prices) cost(l *ledger, running, stopped time.Duration) float64 {
	billedDisk := l.Disk - p.FreeDiskGiB
	if billedDisk < 0 {
		billedDisk = 0
	}
	r := running.Seconds() * (float64(l.CPU)*p.CPUPerSecond + float64(l.Memory)*p.MemoryGiBPerSecond + float64(billedDisk)*p.DiskGiBPerSecond)
	s := stopped.Seconds() * float64(billedDisk) * p.DiskGiBPerSecond
	return r + s
}

// Cost reports the running and stopped seconds of every sandbox so far, the
// warm pool excluded, priced with p (the configured prices when p is zero).
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
	now := s.clk.Now()
	rep := CostReport{Prices: p, Sandboxes: []SandboxCost{}}
	s.mu.RLock()
	defer s.mu.RUnlock()
	s.costs.totals(&rep, sc, now)
	rep.Sandboxes, rep.NextCursor = s.costs.page(p, sc, now, from, limit)
	return rep, nil
}
