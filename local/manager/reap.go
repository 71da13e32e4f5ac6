package manager

import (
	"github.com/sandplane/sandplane/local/driver"
	"github.com/sandplane/sandplane/provider"
)

// reapLater ends, once runtime name answers again, the workloads a failed
// create could not: a create that fails because its runtime stopped
// answering (a docker engine that went away) cannot remove the container
// it made, and its record is gone, so without this the container would be
// an orphan until the daemon's next start. It lists the runtime's orphans
// on the clock, with a pause that grows while the runtime does not answer,
// until one list succeeds, and ends what it lists; Close stops it. One reap
// per runtime runs at a time.
func (m *Manager) reapLater(name provider.Runtime) {
	m.mu.Lock()
	if m.reaping[name] || m.ctx.Err() != nil {
		m.mu.Unlock()
		return
	}
	if m.reaping == nil {
		m.reaping = map[provider.Runtime]bool{}
	}
	m.reaping[name] = true
	m.mu.Unlock()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer func() {
			m.mu.Lock()
			delete(m.reaping, name)
			m.mu.Unlock()
		}()
		m.reap(name)
	}()
}

// reap is reapLater's work.
func (m *Manager) reap(name provider.Runtime) {
	pause := watchRetryMin
	for {
		orphans, err := m.orphansNow(name)
		if err == nil {
			if err := m.endAll(map[provider.Runtime][]driver.Handle{name: orphans}); err != nil {
				m.log.Error("end what a failed create left behind", "runtime", name, "err", err)
			}
			return
		}
		m.log.Warn("a failed create may have left a workload behind; looking again once the runtime answers", "runtime", name, "in", pause, "err", err)
		t := m.clk.NewTimer(pause)
		select {
		case <-m.ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		pause = min(2*pause, watchRetryMax)
	}
}

// orphansNow lists the orphans of runtime name, while no spawn runs.
func (m *Manager) orphansNow(name provider.Runtime) ([]driver.Handle, error) {
	m.spawnMu.Lock()
	defer m.spawnMu.Unlock()
	known, spared := m.owned()
	return m.orphansOf(detach(m.ctx), name, known, spared)
}
