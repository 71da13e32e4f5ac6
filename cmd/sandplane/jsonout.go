package main

import (
	"io"
	"sync"

	"github.com/sandplane/sandplane/provider"
)

// outputEvent is one line of `run --json` and `exec --json`.
type outputEvent struct {
	// Type is "sandbox", "stdout", "stderr" or "exit".
	Type string `json:"type"`
	// Sandbox is the sandbox the command runs in ("sandbox").
	Sandbox *provider.Sandbox `json:"sandbox,omitempty"`
	// Data is what the command wrote ("stdout", "stderr"); bytes that are
	// not UTF-8 become U+FFFD.
	Data string `json:"data,omitempty"`
	// ExitCode is the command's ("exit").
	ExitCode *int `json:"exitCode,omitempty"`
}

// jsonEvents writes a command's output and exit as JSON lines, one object
// per write, in the order they happen.
type jsonEvents struct {
	mu sync.Mutex
	w  io.Writer
}

func newJSONEvents(w io.Writer) *jsonEvents { return &jsonEvents{w: w} }

func (j *jsonEvents) emit(ev outputEvent) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return writeJSONLine(j.w, ev)
}

func (j *jsonEvents) sandbox(s *provider.Sandbox) error {
	return j.emit(outputEvent{Type: "sandbox", Sandbox: s})
}

func (j *jsonEvents) exit(code int) error {
	return j.emit(outputEvent{Type: "exit", ExitCode: &code})
}

// stream is a writer whose every write is one event of type typ.
func (j *jsonEvents) stream(typ string) io.Writer { return streamWriter{j, typ} }

type streamWriter struct {
	j   *jsonEvents
	typ string
}

func (s streamWriter) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if err := s.j.emit(outputEvent{Type: s.typ, Data: string(p)}); err != nil {
		return 0, err
	}
	return len(p), nil
}
