package simulator

import (
	"sort"
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
// so the cost report covers deleted ones too.
type ledger struct {
	ID, OrgID, Name string
	CPU, Memory     int
	Disk            int
	running         time.Duration
	stopped         time.Duration
	since           time.Time
	current         billing
}

func (l *ledger) enter(now time.Time, state string) {
	if l == nil {
		return
	}
	l.settle(now)
	l.current = billingOf(state)
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

// CostReport is what the run would have cost on Daytona.
type CostReport struct {
	Prices         Prices        `json:"prices"`
	RunningSeconds float64       `json:"runningSeconds"`
	StoppedSeconds float64       `json:"stoppedSeconds"`
	Cost           float64       `json:"cost"`
	Sandboxes      []SandboxCost `json:"sandboxes"`
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
func (s *Simulator) Cost(p Prices) CostReport { return s.cost(p, everyOrg) }

// cost is Cost for the sandboxes of sc.
func (s *Simulator) cost(p Prices, sc scope) CostReport {
	if p == (Prices{}) {
		p = s.cfg.Prices
	}
	now := s.clk.Now()
	s.mu.Lock()
	ledgers := append([]*ledger(nil), s.ledgers...)
	rep := CostReport{Prices: p, Sandboxes: make([]SandboxCost, 0, len(ledgers))}
	for _, l := range ledgers {
		if l.OrgID == warmPoolOrg || !sc.owns(l.OrgID) {
			continue
		}
		run, stop := l.totals(now)
		c := SandboxCost{ID: l.ID, OrganizationID: l.OrgID, Name: l.Name,
			RunningSeconds: run.Seconds(), StoppedSeconds: stop.Seconds(), Cost: p.cost(l, run, stop)}
		rep.RunningSeconds += c.RunningSeconds
		rep.StoppedSeconds += c.StoppedSeconds
		rep.Cost += c.Cost
		rep.Sandboxes = append(rep.Sandboxes, c)
	}
	s.mu.Unlock()
	sort.Slice(rep.Sandboxes, func(i, j int) bool { return rep.Sandboxes[i].ID < rep.Sandboxes[j].ID })
	return rep
}
