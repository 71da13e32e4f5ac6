package provider

import "context"

// Status is what a host server shows about its provider on a health page or
// at startup: whether it is set up, whether the backend accepted a request,
// and when not, what failed and what to do.
type Status struct {
	// Provider is the backend's name, as in Traits.Name.
	Provider string `json:"provider"`
	// Endpoint is where the provider sends requests: the daemon address or
	// the API URL. Never a secret.
	Endpoint string `json:"endpoint"`
	// Configured: the settings the provider needs are present (an API key,
	// a daemon address). It says nothing about whether they work.
	Configured bool `json:"configured"`
	// Authenticated: a request with those settings succeeded just now.
	Authenticated bool `json:"authenticated"`
	// Code classifies the failure when Authenticated is false: unavailable
	// (nothing answers), unauthenticated (the credentials were refused),
	// invalid_argument (a setting is malformed) and so on. Empty when
	// Authenticated.
	Code ErrorCode `json:"code,omitempty"`
	// Message says what failed and what to do, written for the person who
	// runs the host server. Empty when Authenticated.
	Message string `json:"message,omitempty"`
	// Auth is the settled answer of every call the provider made (see
	// AuthEvidence): configured, authenticated or required, since when and
	// why. Unlike Authenticated it outlives one probe: a transient failure
	// leaves it as it was.
	Auth Auth `json:"auth"`
}

// OK reports whether the provider is configured and answered.
func (s Status) OK() bool { return s.Configured && s.Authenticated }

// StatusReporter is implemented by providers that can check their own
// configuration and connectivity. Status makes at most a couple of cheap
// requests and never fails: what goes wrong is reported in the Status.
type StatusReporter interface {
	Status(ctx context.Context) Status
}
