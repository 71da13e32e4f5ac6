package pool

import (
	"time"

	"github.com/sandplane/sandplane/provider"
)

// Observer is told what the pool does, for metrics; poolmetrics has one for
// Prometheus. Keeping the collectors out of this package keeps Prometheus
// and protobuf out of every host that never scrapes the pool.
//
// The pool calls its methods synchronously and concurrently, from the
// goroutine doing the work and sometimes with a key's lock held: they must
// be safe for concurrent use, return quickly, and never call back into the
// pool, except that they may call Stats and Name at any time after Attach.
type Observer interface {
	// Attach is called once, by New, before the pool reads its store; an
	// error fails New. It is where an observer learns the pool's name and
	// keeps p to read Stats from later.
	Attach(p *Pool) error
	// Acquired: Acquire handed out a sandbox by path, in took.
	Acquired(path Path, took time.Duration)
	// AcquireFailed: Acquire returned an error of code.
	AcquireFailed(code provider.ErrorCode)
	// TornDown: the pool stopped or deleted a sandbox for reason.
	TornDown(reason Reason)
	// Evicted: a warm sandbox is being stopped to make room under the warm
	// cap for a turn that ended later.
	Evicted()
	// StopUnconfirmed: a stop or delete was not confirmed within
	// StopTimeout; the sandbox counts as running until the provider
	// confirms it.
	StopUnconfirmed()
}

// nopObserver is the pool's observer when the host gives none, so that the
// pool never checks for nil.
type nopObserver struct{}

func (nopObserver) Attach(*Pool) error               { return nil }
func (nopObserver) Acquired(Path, time.Duration)     {}
func (nopObserver) AcquireFailed(provider.ErrorCode) {}
func (nopObserver) TornDown(Reason)                  {}
func (nopObserver) Evicted()                         {}
func (nopObserver) StopUnconfirmed()                 {}
