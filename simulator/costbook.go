package simulator

import (
	"strconv"
	"time"

	"github.com/google/btree"
)

// costBook keeps the ledgers so that the cost report stays exact while its
// memory stays bounded: a row per live sandbox and per recently deleted one
// (the last keep of them, oldest out first), and per organization the sums
// of the deleted ones pruned beyond that. The sums are kept per disk size,
// since the free disk allowance of a price is applied per sandbox. Guarded
// by Simulator.mu.
type costBook struct {
	seq    uint64
	rows   *btree.BTreeG[*ledger] // by seq: live and retained
	keep   int
	ring   []*ledger // the retained deleted ones, oldest at next once full
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

func newCostBook(keep int) *costBook {
	return &costBook{
		rows:   btree.NewG(btreeDegree, func(a, b *ledger) bool { return a.seq < b.seq }),
		keep:   keep,
		pruned: map[string]*prunedCosts{},
	}
}

// open starts l's row.
func (b *costBook) open(l *ledger) {
	b.seq++
	l.seq, l.book = b.seq, b
	b.rows.ReplaceOrInsert(l)
}

// close marks l final; its row stays among the last keep deleted, then
// moves into its organization's sums.
func (b *costBook) close(l *ledger) {
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

func (b *costBook) prune(l *ledger) {
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

// len is how many rows the book holds.
func (b *costBook) len() int { return b.rows.Len() }

// totals adds every sandbox of sc up to now, warm pool aside, to rep.
func (b *costBook) totals(rep *CostReport, sc scope, now time.Time) {
	p := rep.Prices
	b.rows.Ascend(func(l *ledger) bool {
		if l.OrgID == warmPoolOrg || !sc.owns(l.OrgID) {
			return true
		}
		run, stop := l.totals(now)
		rep.RunningSeconds += run.Seconds()
		rep.StoppedSeconds += stop.Seconds()
		rep.Cost += p.cost(l, run, stop)
		return true
	})
	for org, pc := range b.pruned {
		if org == warmPoolOrg || !sc.owns(org) {
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

// page is the rows of sc from seq from on, at most limit (0: all), and the
// cursor of the next page when more follow.
func (b *costBook) page(p Prices, sc scope, now time.Time, from uint64, limit int) ([]SandboxCost, string) {
	out := []SandboxCost{}
	next := ""
	var last uint64
	b.rows.AscendGreaterOrEqual(&ledger{seq: from}, func(l *ledger) bool {
		if l.OrgID == warmPoolOrg || !sc.owns(l.OrgID) {
			return true
		}
		if limit > 0 && len(out) == limit {
			next = strconv.FormatUint(last, 10)
			return false
		}
		run, stop := l.totals(now)
		out = append(out, SandboxCost{ID: l.ID, OrganizationID: l.OrgID, Name: l.Name,
			RunningSeconds: run.Seconds(), StoppedSeconds: stop.Seconds(), Cost: p.cost(l, run, stop)})
		last = l.seq
		return true
	})
	return out, next
}

// maxCostPage bounds a page of GET /_sim/cost.
const maxCostPage = 10000
