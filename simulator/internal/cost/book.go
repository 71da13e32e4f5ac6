package cost

import (
	"strconv"
	"time"

	"github.com/google/btree"
)

// SandboxCost is one sandbox's share of a Report.
type SandboxCost struct {
	ID             string `json:"id"`
	OrganizationID string `json:"organizationId"`
	Name           string `json:"name"`
	// WarmPool, on a warm pool's row, is the pool that paid for the
	// sandbox until it was handed over (or destroyed unclaimed).
	WarmPool       string  `json:"warmPool,omitempty"`
	RunningSeconds float64 `json:"runningSeconds"`
	StoppedSeconds float64 `json:"stoppedSeconds"`
	Cost           float64 `json:"cost"`
}

// Report is what the run would have cost on Daytona. The totals cover
// every sandbox of the run; Sandboxes lists the live ones and the last
// deleted ones in creation order, one page of them when the report was
// asked for with a limit.
type Report struct {
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

// MaxPage bounds a page of a Report.
const MaxPage = 10000

// btreeDegree suits books of up to a few hundred thousand rows.
const btreeDegree = 32

// Book keeps the ledgers: a row per live sandbox and per recently deleted
// one (the last keep of them, oldest out first), and per organization the
// sums of the deleted ones pruned beyond that. The sums are kept per disk
// size, since the free disk allowance of a price applies per sandbox. A
// Book does not lock: its caller serialises writes and may read
// concurrently with other reads.
type Book struct {
	seq    uint64
	rows   *btree.BTreeG[*Ledger] // by seq: live and retained
	keep   int
	ring   []*Ledger // the retained deleted ones, oldest at next once full
	next   int
	pruned map[string]*prunedCosts
}

// prunedCosts are the sums of an organization's pruned ledgers.
type prunedCosts struct {
	count  int
	byDisk map[int]*diskSeconds
}

// diskSeconds sums the ledgers of one disk size, in seconds; running ones
// also weighted by vCPUs and by GiB of memory.
type diskSeconds struct {
	running, stopped, cpuRunning, memRunning float64
}

// NewBook returns a book that keeps the rows of the last keep deleted
// sandboxes.
func NewBook(keep int) *Book {
	return &Book{
		rows:   btree.NewG(btreeDegree, func(a, b *Ledger) bool { return a.seq < b.seq }),
		keep:   keep,
		pruned: map[string]*prunedCosts{},
	}
}

// Open starts l's row, billing b from now on.
func (b *Book) Open(l *Ledger, now time.Time, bill Billing) {
	b.seq++
	l.seq, l.book = b.seq, b
	l.since, l.current = now, bill
	b.rows.ReplaceOrInsert(l)
}

// close marks l final; its row stays among the last keep deleted, then
// moves into its organization's sums.
func (b *Book) close(l *Ledger) {
	l.closed = true
	if b.keep <= 0 {
		b.prune(l)
		return
	}
	if len(b.ring) < b.keep {
		b.ring = append(b.ring, l)
		return
	}
	b.prune(b.ring[b.next])
	b.ring[b.next] = l
	b.next = (b.next + 1) % b.keep
}

func (b *Book) prune(l *Ledger) {
	b.rows.Delete(l)
	pc := b.pruned[l.OrgID]
	if pc == nil {
		pc = &prunedCosts{byDisk: map[int]*diskSeconds{}}
		b.pruned[l.OrgID] = pc
	}
	ds := pc.byDisk[l.Disk]
	if ds == nil {
		ds = &diskSeconds{}
		pc.byDisk[l.Disk] = ds
	}
	run, stop := l.running.Seconds(), l.stopped.Seconds()
	ds.running += run
	ds.stopped += stop
	ds.cpuRunning += run * float64(l.CPU)
	ds.memRunning += run * float64(l.Memory)
	pc.count++
}

// Len is how many rows the book holds.
func (b *Book) Len() int { return b.rows.Len() }

// Totals adds every sandbox of the organizations owns accepts, up to now,
// to rep, at rep.Prices.
func (b *Book) Totals(rep *Report, owns func(org string) bool, now time.Time) {
	p := rep.Prices
	b.rows.Ascend(func(l *Ledger) bool {
		if !owns(l.OrgID) {
			return true
		}
		run, stop := l.Totals(now)
		rep.RunningSeconds += run.Seconds()
		rep.StoppedSeconds += stop.Seconds()
		rep.Cost += p.Cost(l, run, stop)
		return true
	})
	for org, pc := range b.pruned {
		if !owns(org) {
			continue
		}
		rep.Pruned += pc.count
		for disk, ds := range pc.byDisk {
			billed := float64(max(disk-p.FreeDiskGiB, 0))
			rep.RunningSeconds += ds.running
			rep.StoppedSeconds += ds.stopped
			rep.Cost += ds.cpuRunning*p.CPUPerSecond + ds.memRunning*p.MemoryGiBPerSecond +
				(ds.running+ds.stopped)*billed*p.DiskGiBPerSecond
		}
	}
}

// Page is the rows of the organizations owns accepts from seq from on, at
// most limit (0: all), and the cursor of the next page when more follow.
func (b *Book) Page(p Prices, owns func(org string) bool, now time.Time, from uint64, limit int) ([]SandboxCost, string) {
	out := []SandboxCost{}
	next := ""
	var last uint64
	b.rows.AscendGreaterOrEqual(&Ledger{seq: from}, func(l *Ledger) bool {
		if !owns(l.OrgID) {
			return true
		}
		if limit > 0 && len(out) == limit {
			next = strconv.FormatUint(last, 10)
			return false
		}
		run, stop := l.Totals(now)
		out = append(out, SandboxCost{ID: l.ID, OrganizationID: l.OrgID, Name: l.Name, WarmPool: l.WarmPool,
			RunningSeconds: run.Seconds(), StoppedSeconds: stop.Seconds(), Cost: p.Cost(l, run, stop)})
		last = l.seq
		return true
	})
	return out, next
}
