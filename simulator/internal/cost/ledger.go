package cost

import "time"

// Billing is what a sandbox pays for while in a state.
type Billing int

const (
	// None: nothing (an archived sandbox lives in object storage, which
	// the simulator does not charge; a destroyed one is gone).
	None Billing = iota
	// Running: compute, memory and disk.
	Running
	// Stopped: disk only.
	Stopped
)

// Prices are per-second list prices. Running sandboxes pay for CPU, memory
// and disk; stopped ones for disk only.
type Prices struct {
	CPUPerSecond       float64 `json:"cpuPerSecond"`
	MemoryGiBPerSecond float64 `json:"memoryGiBPerSecond"`
	DiskGiBPerSecond   float64 `json:"diskGiBPerSecond"`
	// FreeDiskGiB is the disk each sandbox gets without charge.
	FreeDiskGiB int `json:"freeDiskGiB"`
}

// Cost prices the seconds l ran and stood stopped.
func (p Prices) Cost(l *Ledger, running, stopped time.Duration) float64 {
	billedDisk := max(l.Disk-p.FreeDiskGiB, 0)
	r := running.Seconds() * (float64(l.CPU)*p.CPUPerSecond + float64(l.Memory)*p.MemoryGiBPerSecond + float64(billedDisk)*p.DiskGiBPerSecond)
	s := stopped.Seconds() * float64(billedDisk) * p.DiskGiBPerSecond
	return r + s
}

// Ledger accumulates one sandbox's billed seconds. The resources may change
// (a resize) and price the whole of its seconds, as Daytona's report does.
type Ledger struct {
	ID, OrgID, Name string
	// WarmPool is the pool that pays for the sandbox while it waits in
	// it unclaimed; "" for a caller's sandbox. A handover closes the
	// pool's ledger and opens the caller's.
	WarmPool    string
	CPU, Memory int
	Disk        int

	running time.Duration
	stopped time.Duration
	since   time.Time
	current Billing

	// seq orders the report's rows (creation order) and is its cursor.
	seq    uint64
	book   *Book
	closed bool
}

// Enter settles the seconds so far and bills b from now on. A final entry
// (the sandbox is destroyed) closes the ledger: it never changes again. A
// nil ledger ignores it.
func (l *Ledger) Enter(now time.Time, b Billing, final bool) {
	if l == nil || l.closed {
		return
	}
	l.settle(now)
	l.current = b
	if final && l.book != nil {
		l.book.close(l)
	}
}

func (l *Ledger) settle(now time.Time) {
	l.running, l.stopped = l.Totals(now)
	l.since = now
}

// Totals returns the seconds up to now without settling.
func (l *Ledger) Totals(now time.Time) (running, stopped time.Duration) {
	running, stopped = l.running, l.stopped
	if d := now.Sub(l.since); d > 0 {
		switch l.current {
		case Running:
			running += d
		case Stopped:
			stopped += d
		}
	}
	return running, stopped
}
