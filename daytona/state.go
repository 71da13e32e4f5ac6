package daytona

import (
	"time"

	apiclient "github.com/daytonaio/daytona/libs/api-client-go"

	"github.com/sandplane/sandplane/provider"
)

// mapState is the one translation of Daytona's (derived, display) states
// into the contract's six. Transitions toward running are starting, toward
// rest stopping (pausing too); archived sandboxes are stopped and paused
// ones paused (start brings both back); a sandbox being resized, snapshotted or forked keeps running.
// A state this client does not know is an error, so that nobody waits on it
// forever.
func mapState(s apiclient.SandboxState) provider.State {
	switch s {
	case apiclient.SANDBOXSTATE_STARTED,
		apiclient.SANDBOXSTATE_RESIZING, apiclient.SANDBOXSTATE_SNAPSHOTTING, apiclient.SANDBOXSTATE_FORKING:
		return provider.StateStarted
	case apiclient.SANDBOXSTATE_CREATING, apiclient.SANDBOXSTATE_STARTING, apiclient.SANDBOXSTATE_RESTORING,
		apiclient.SANDBOXSTATE_RESUMING, apiclient.SANDBOXSTATE_UNKNOWN, apiclient.SANDBOXSTATE_PULLING_SNAPSHOT,
		apiclient.SANDBOXSTATE_PENDING_BUILD, apiclient.SANDBOXSTATE_BUILDING_SNAPSHOT:
		return provider.StateStarting
	case apiclient.SANDBOXSTATE_STOPPING, apiclient.SANDBOXSTATE_PAUSING, apiclient.SANDBOXSTATE_ARCHIVING:
		return provider.StateStopping
	case apiclient.SANDBOXSTATE_STOPPED, apiclient.SANDBOXSTATE_ARCHIVED:
		return provider.StateStopped
	case apiclient.SANDBOXSTATE_PAUSED:
		return provider.StatePaused
	case apiclient.SANDBOXSTATE_DESTROYING, apiclient.SANDBOXSTATE_DESTROYED:
		// A destroying sandbox has already lost its name; it cannot come back.
		return provider.StateDestroyed
	}
	return provider.StateError // error, build_failed, and anything newer than this client
}

// failed reports the states in which waiting is pointless.
func failed(s apiclient.SandboxState) bool {
	return mapState(s) == provider.StateError
}

// toSandbox maps a Daytona Sandbox. Runtime stays empty: Daytona runs its own
// containers, neither of the local runtimes.
func toSandbox(sb *apiclient.Sandbox) *provider.Sandbox {
	out := &provider.Sandbox{
		ID:                 sb.Id,
		Name:               sb.Name,
		State:              mapState(sb.GetState()),
		Labels:             labels(sb.Labels),
		SessionID:          session(sb.Labels),
		AutoDeleteInterval: autoDelete(sb.AutoDeleteInterval),
		Public:             sb.GetPublic(),
		Snapshot:           sb.GetSnapshot(),
		AutoStopInterval:   int(sb.GetAutoStopInterval()),
		ErrorReason:        errorReason(sb.GetState(), sb.GetErrorReason()),
		CreatedAt:          timestamp(sb.CreatedAt),
		UpdatedAt:          timestamp(sb.UpdatedAt),
		LastActivityAt:     timestamp(sb.LastActivityAt),
	}
	newer(out, sb.AdditionalProperties)
	return out
}

// fromListItem maps a list item, which is a Sandbox without env and a few
// other fields.
func fromListItem(it *apiclient.SandboxListItem) provider.Sandbox {
	out := provider.Sandbox{
		ID:                 it.Id,
		Name:               it.Name,
		State:              mapState(it.GetState()),
		Labels:             labels(it.Labels),
		SessionID:          session(it.Labels),
		AutoDeleteInterval: autoDelete(it.AutoDeleteInterval),
		Public:             it.GetPublic(),
		Snapshot:           it.GetSnapshot(),
		AutoStopInterval:   int(it.GetAutoStopInterval()),
		ErrorReason:        errorReason(it.GetState(), it.GetErrorReason()),
		CreatedAt:          timestamp(it.CreatedAt),
		UpdatedAt:          timestamp(it.UpdatedAt),
		LastActivityAt:     timestamp(it.LastActivityAt),
	}
	newer(&out, it.AdditionalProperties)
	return out
}

// errorReason names a state the contract cannot express when Daytona gives
// no reason of its own.
func errorReason(s apiclient.SandboxState, reason string) string {
	switch {
	case reason != "" || mapState(s) != provider.StateError || s == apiclient.SANDBOXSTATE_ERROR:
	case s == apiclient.SANDBOXSTATE_UNKNOWN_DEFAULT_OPEN_API:
		return "Daytona reports a state this client does not know"
	default:
		return "Daytona state " + string(s)
	}
	return reason
}

// newer copies to out the fields of a sandbox that Daytona added after the
// pinned api-client (v0.205.1's autoPauseInterval and autoDestroyAt), which
// the client leaves in its AdditionalProperties; absent or odd ones stay
// zero.
func newer(out *provider.Sandbox, extra map[string]any) {
	if n, ok := extra["autoPauseInterval"].(float64); ok && n > 0 {
		out.AutoPauseInterval = int(n)
	}
	if s, ok := extra["autoDestroyAt"].(string); ok {
		if t := timestamp(&s); !t.IsZero() {
			out.AutoDestroyAt = &t
		}
	}
}

// autoDelete is Daytona's autoDeleteInterval as the contract says it: -1
// (Daytona's default) when absent or negative.
func autoDelete(minutes *float32) int {
	if minutes == nil || *minutes < 0 {
		return -1
	}
	return int(*minutes)
}

// session is the session LabelSession names, nil without one.
func session(labels map[string]string) *string {
	id, ok := labels[provider.LabelSession]
	if !ok {
		return nil
	}
	return &id
}

func labels(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// timestamp parses Daytona's ISO timestamps; a missing or odd one is zero.
func timestamp(s *string) time.Time {
	if s == nil {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, *s)
	if err != nil {
		return time.Time{}
	}
	return t
}
