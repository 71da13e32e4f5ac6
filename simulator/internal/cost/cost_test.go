package cost

import (
	"math"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

func everyOrg(string) bool { return true }

// TestLedgerBillsEachStateItsSeconds follows one ledger through a run of
// billings, closing or not.
func TestLedgerBillsEachStateItsSeconds(t *testing.T) {
	type step struct {
		at    int
		bill  Billing
		final bool
	}
	for _, tc := range []struct {
		name             string
		open             Billing
		steps            []step
		until            int
		running, stopped int
	}{
		{name: "runs", open: Running, until: 10, running: 10},
		{name: "runs then stops", open: Running, steps: []step{{4, Stopped, false}}, until: 10, running: 4, stopped: 6},
		{name: "archived costs nothing", open: Running, steps: []step{{3, None, false}}, until: 10, running: 3},
		{name: "closed never changes", open: Running, steps: []step{{5, None, true}, {6, Running, false}}, until: 10, running: 5},
		{name: "starts unbilled", open: None, steps: []step{{2, Running, false}, {7, Stopped, false}}, until: 9, running: 5, stopped: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBook(1)
			l := &Ledger{ID: "a", OrgID: "o", CPU: 1, Memory: 1, Disk: 3}
			b.Open(l, t0, tc.open)
			for _, s := range tc.steps {
				l.Enter(at(s.at), s.bill, s.final)
			}
			run, stop := l.Totals(at(tc.until))
			if run != time.Duration(tc.running)*time.Second || stop != time.Duration(tc.stopped)*time.Second {
				t.Errorf("running %v stopped %v, want %ds and %ds", run, stop, tc.running, tc.stopped)
			}
		})
	}
	var nilLedger *Ledger
	nilLedger.Enter(t0, Running, false) // a sandbox without a ledger is not billed
}

// TestBookKeepsTotalsAndBoundsRows closes more ledgers than the book keeps
// rows for: the totals are exact, the oldest rows give way, and the rows
// page by cursor.
func TestBookKeepsTotalsAndBoundsRows(t *testing.T) {
	p := Prices{CPUPerSecond: 1, MemoryGiBPerSecond: 0.5, DiskGiBPerSecond: 0.01, FreeDiskGiB: 1}
	for _, tc := range []struct {
		name   string
		keep   int
		rows   int
		pruned int
	}{
		{name: "keeps none", keep: 0, rows: 1, pruned: 4},
		{name: "keeps two", keep: 2, rows: 3, pruned: 2},
		{name: "keeps all", keep: 10, rows: 5, pruned: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBook(tc.keep)
			var ls []*Ledger
			for i := range 5 {
				l := &Ledger{ID: string(rune('a' + i)), OrgID: "o", CPU: 1, Memory: 1, Disk: 3}
				b.Open(l, t0, Running)
				ls = append(ls, l)
			}
			for _, l := range ls[:4] {
				l.Enter(at(10), None, true)
			}
			rep := Report{Prices: p}
			b.Totals(&rep, everyOrg, at(20))
			// four ran 10 s and one 20 s, each at 1 vCPU×1 + 1 GiB×0.5 + 2 billed GiB×0.01
			if math.Abs(rep.RunningSeconds-60) > 1e-9 || math.Abs(rep.Cost-60*1.52) > 1e-9 {
				t.Errorf("totals %v s, %v; want 60 s, %v", rep.RunningSeconds, rep.Cost, 60*1.52)
			}
			if rep.Pruned != tc.pruned || b.Len() != tc.rows {
				t.Errorf("pruned %d rows %d, want %d and %d", rep.Pruned, b.Len(), tc.pruned, tc.rows)
			}
			var got []SandboxCost
			var from uint64
			for range 10 {
				page, next := b.Page(p, everyOrg, at(20), from, 2)
				got = append(got, page...)
				if next == "" {
					break
				}
				var n uint64
				for _, c := range next {
					n = n*10 + uint64(c-'0')
				}
				from = n + 1
			}
			if len(got) != tc.rows || got[len(got)-1].ID != "e" {
				t.Errorf("pages %+v, want the last %d rows ending with e", got, tc.rows)
			}
		})
	}
}

// TestBookTotalsOnlyTheOrganizationsAsked: another organization's rows and
// sums stay out of a report.
func TestBookTotalsOnlyTheOrganizationsAsked(t *testing.T) {
	b := NewBook(0)
	for _, org := range []string{"o", "other", "other"} {
		l := &Ledger{ID: org, OrgID: org, CPU: 1}
		b.Open(l, t0, Running)
		if org == "other" {
			l.Enter(at(5), None, true)
		}
	}
	rep := Report{Prices: Prices{CPUPerSecond: 1}}
	b.Totals(&rep, func(org string) bool { return org == "o" }, at(10))
	if rep.Cost != 10 || rep.Pruned != 0 {
		t.Errorf("cost %v pruned %d, want 10 and 0", rep.Cost, rep.Pruned)
	}
	page, _ := b.Page(rep.Prices, func(org string) bool { return org == "o" }, at(10), 0, 0)
	if len(page) != 1 || page[0].ID != "o" {
		t.Errorf("page %+v, want the row of o alone", page)
	}
}

// TestPageNamesThePoolThatPays: a warm pool's ledger keeps its row apart
// from the caller's ledger of the same sandbox, and says which pool paid.
func TestPageNamesThePoolThatPays(t *testing.T) {
	b := NewBook(10)
	pooled := &Ledger{ID: "a", OrgID: "o", WarmPool: "p", CPU: 1}
	b.Open(pooled, t0, Running)
	pooled.Enter(at(4), None, true) // handed over
	b.Open(&Ledger{ID: "a", OrgID: "o", CPU: 1}, at(4), Running)
	page, _ := b.Page(Prices{CPUPerSecond: 1}, everyOrg, at(10), 0, 0)
	want := []SandboxCost{
		{ID: "a", OrganizationID: "o", WarmPool: "p", RunningSeconds: 4, Cost: 4},
		{ID: "a", OrganizationID: "o", RunningSeconds: 6, Cost: 6},
	}
	if len(page) != 2 || page[0] != want[0] || page[1] != want[1] {
		t.Errorf("page %+v, want %+v", page, want)
	}
}
