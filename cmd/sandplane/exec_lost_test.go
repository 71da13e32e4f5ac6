package main

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"

	"github.com/sandplane/sandplane/provider"
	"github.com/sandplane/sandplane/provider/clock"
)

// passingProvider answers Get with the states it is given, one per call,
// and NotFound once they run out: a sandbox on its way through a delete.
type passingProvider struct {
	provider.Provider // the methods whyLost does not reach panic
	states            []provider.State
	gets              int
}

func (p *passingProvider) Get(_ context.Context, id string) (*provider.Sandbox, error) {
	p.gets++
	if len(p.states) == 0 {
		return nil, provider.Errorf(provider.NotFound, "sandbox %s not found", id)
	}
	s := p.states[0]
	p.states = p.states[1:]
	return &provider.Sandbox{ID: id, State: s}, nil
}

func TestWhyLostWaitsOutStopping(t *testing.T) {
	lost := errors.New("toolbox: 503")
	for _, tc := range []struct {
		name   string
		states []provider.State
		code   provider.ErrorCode
		says   string
	}{
		{"deleted while stopping", []provider.State{provider.StateStopping, provider.StateStopping}, provider.NotFound, "was deleted"},
		{"stopped after stopping", []provider.State{provider.StateStopping, provider.StateStopped, provider.StateStopped}, provider.FailedPrecondition, "is stopped"},
		{"still started", []provider.State{provider.StateStarted}, "", "toolbox: 503"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The bubble's clock moves only when every goroutine waits, so
			// the backoff between lookups costs no wall time.
			synctest.Test(t, func(t *testing.T) {
				p := &passingProvider{states: tc.states}
				o := &clientOptions{clk: clock.Real(), stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}
				err := whyLost(context.Background(), p, o, "sb", "sb-1", lost, true)
				assert.ErrorContains(t, err, tc.says)
				if tc.code != "" {
					assert.Equal(t, tc.code, provider.Code(err))
				} else {
					assert.ErrorIs(t, err, lost)
				}
			})
		})
	}
}

func TestWhyLostGivesUpOnAStuckStopping(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stuck := make([]provider.State, 1000)
		for i := range stuck {
			stuck[i] = provider.StateStopping
		}
		p := &passingProvider{states: stuck}
		o := &clientOptions{clk: clock.Real(), stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}
		err := whyLost(context.Background(), p, o, "sb", "sb-1", errors.New("lost"), true)
		assert.ErrorContains(t, err, "is stopping", "after the lookup deadline it says what it last saw")
		assert.Less(t, p.gets, len(stuck), "the lookups back off rather than spin")
	})
}
