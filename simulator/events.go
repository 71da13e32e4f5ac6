package simulator

import (
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/zishang520/socket.io/servers/socket/v3"
)

// Event names of Daytona's notification gateway: what the SDKs subscribe
// to over socket.io, and the names of its webhooks.
const (
	EventSandboxCreated             = "sandbox.created"
	EventSandboxStateUpdated        = "sandbox.state.updated"
	EventSandboxDesiredStateUpdated = "sandbox.desired-state.updated"
	EventSnapshotCreated            = "snapshot.created"
	EventSnapshotStateUpdated       = "snapshot.state.updated"
	EventSnapshotRemoved            = "snapshot.removed"
	EventVolumeCreated              = "volume.created"
	EventVolumeStateUpdated         = "volume.state.updated"
	EventVolumeLastUsedAtUpdated    = "volume.last-used-at.updated"
)

// eventsPath is where the SDKs look for the gateway: the API base path
// followed by /socket.io/.
const eventsPath = "/api/socket.io"

// event is one message for the sockets of an organization.
type event struct {
	org  string
	name string
	data any
}

// eventBus is Daytona's notification gateway: a socket.io server on
// /api/socket.io/ whose clients authenticate with an API key (auth.token of
// the handshake) and join the room of its organization, which receives
// every event of that organization's sandboxes, snapshots and volumes.
// Events are queued under the simulator's lock and sent, in order, by one
// goroutine, so that a slow client never holds the lock.
type eventBus struct {
	io      *socket.Server
	handler http.Handler

	// onEmit, when set, sees the name of every event queued (the metrics).
	onEmit func(name string)
	// onWebhook, when set, sees every event with its organization and
	// data, under the simulator's lock (the webhooks).
	onWebhook func(org, name string, data any)
	// accepted counts the clients ever let in.
	accepted atomic.Int64

	mu     sync.Mutex
	queue  []event
	wake   chan struct{}
	closed bool
	done   chan struct{}
}

// newEventBus starts the gateway; authenticate maps an API key to its
// organization ("" refuses it).
func newEventBus(authenticate func(key string) string) *eventBus {
	opts := socket.DefaultServerOptions()
	opts.SetPath(eventsPath)
	opts.SetServeClient(false)
	io := socket.NewServer(nil, opts)
	b := &eventBus{io: io, wake: make(chan struct{}, 1), done: make(chan struct{})}
	io.Use(func(c *socket.Socket, next func(*socket.ExtendedError)) {
		key, _ := c.Handshake().Auth["token"].(string)
		org := authenticate(key)
		if org == "" {
			next(socket.NewExtendedError(msgInvalidCredentials, nil))
			return
		}
		c.Join(socket.Room(org))
		b.accepted.Add(1)
		next(nil)
	})
	b.handler = io.ServeHandler(opts)
	go b.run()
	return b
}

// clients is how many clients are connected.
func (b *eventBus) clients() int {
	if b == nil || b.io.Engine() == nil {
		return 0
	}
	return int(b.io.Engine().ClientsCount())
}

// emit queues an event for org's sockets.
func (b *eventBus) emit(org, name string, data any) {
	if b == nil || org == "" || isPoolOrg(org) {
		return
	}
	if b.onEmit != nil {
		b.onEmit(name)
	}
	if b.onWebhook != nil {
		b.onWebhook(org, name, data)
	}
	b.mu.Lock()
	if !b.closed {
		b.queue = append(b.queue, event{org: org, name: name, data: data})
	}
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

func (b *eventBus) run() {
	defer close(b.done)
	for range b.wake {
		b.mu.Lock()
		q := b.queue
		b.queue = nil
		closed := b.closed
		b.mu.Unlock()
		// With no client connected there is no room to reach, and the
		// encoding of every event would be work for nobody.
		if b.clients() > 0 {
			for _, e := range q {
				_ = b.io.To(socket.Room(e.org)).Emit(e.name, e.data)
			}
		}
		if closed {
			return
		}
	}
}

// close sends what is queued, then disconnects every client.
func (b *eventBus) close() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.closed = true
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
	<-b.done
	b.io.Close(nil)
}

// sandboxStateEvent is the payload of sandbox.state.updated: the sandbox as
// the API shows it, with the raw states before and after.
type sandboxStateEvent struct {
	Sandbox  sandboxDTO `json:"sandbox"`
	OldState string     `json:"oldState"`
	NewState string     `json:"newState"`
}

// sandboxDesiredStateEvent is the payload of sandbox.desired-state.updated.
type sandboxDesiredStateEvent struct {
	Sandbox         sandboxDTO `json:"sandbox"`
	OldDesiredState string     `json:"oldDesiredState"`
	NewDesiredState string     `json:"newDesiredState"`
}

// sandboxEvents emits what changed about sb since its last events: its raw
// state, its desired state. Called with s.mu held, from sandbox.notify.
func (sb *sandbox) emitChanges() {
	if sb.events == nil {
		return
	}
	state, desired := sb.State, sb.Desired
	if state == sb.evState && desired == sb.evDesired {
		return
	}
	dto := sb.dto(sb.proxyBase, false)
	if desired != sb.evDesired {
		sb.events.emit(sb.OrgID, EventSandboxDesiredStateUpdated,
			sandboxDesiredStateEvent{Sandbox: dto, OldDesiredState: sb.evDesired, NewDesiredState: desired})
	}
	if state != sb.evState {
		sb.events.emit(sb.OrgID, EventSandboxStateUpdated,
			sandboxStateEvent{Sandbox: dto, OldState: sb.evState, NewState: state})
	}
	sb.evState, sb.evDesired = state, desired
}

// emitCreated announces a new row: sandbox.created with the sandbox as the
// create answers it. Later changes are events of their own. Called with
// s.mu held.
func (sb *sandbox) emitCreated() {
	sb.evState, sb.evDesired = sb.State, sb.Desired
	if sb.events != nil {
		sb.events.emit(sb.OrgID, EventSandboxCreated, sb.dto(sb.proxyBase, true))
	}
}
