package simulator

import (
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/sandplane/sandplane/provider/clock"
	"github.com/sandplane/sandplane/simulator/internal/backend"
	"github.com/sandplane/sandplane/simulator/internal/cost"
	"github.com/sandplane/sandplane/simulator/internal/faults"
	"github.com/sandplane/sandplane/simulator/internal/secrets"
	"github.com/sandplane/sandplane/simulator/internal/sshgw"
	"github.com/sandplane/sandplane/simulator/internal/store"
	"github.com/sandplane/sandplane/simulator/internal/webhooks"
)

// Simulator is a stateful Daytona API. It is safe for concurrent use.
type Simulator struct {
	cfg      Config
	clk      clock.Clock
	backend  Backend
	syncWork bool // the backend's work is free, so zero-delay steps run inline
	spec     *spec
	faults   *faults.Set
	calls    *callLog
	orgNames *orgNames
	events   *eventBus
	metrics  *simMetrics
	proxies  *proxies   // the preview and toolbox proxies (proxy.go)
	eng      reconciler // transitions, the warm pool and the jobs (reconciler.go)
	// secrets are the organizations' secrets and the sandboxes' mounts;
	// egress is the proxy that substitutes them, listening at egressAddr,
	// nil where the backend's workloads cannot reach it (egress.go).
	secrets    *secrets.Store
	egress     *secrets.Proxy
	egressAddr string
	snapshots  map[string]Snapshot
	anySnap    bool

	// bg is the context of background work; Close cancels it.
	bg     context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// mu guards the state below; reads (a get, a list) take it shared, so
	// that a list never holds up a get.
	// netMu orders the network settings applied to workloads
	// (enforceNetwork).
	netMu sync.Mutex

	mu   store.Lock
	rows *store.Store[*sandbox] // the sandboxes (store.go)
	// pools are the warm pools by id; poolIndex finds the one a create
	// can take from by poolKey (warmpools.go).
	pools     map[string]*warmPool
	poolIndex map[string]*warmPool
	costs     *cost.Book
	signed    map[string]*signedToken
	// snapshots, volumes and SSH tokens (snapshots.go, volumes.go,
	// sandboxextra.go); name indexes are keyed by nameKey, general
	// snapshots under the organization "".
	snaps     map[string]*snapshotRec
	snapNames map[string]*snapshotRec
	vols      map[string]*volumeRec
	volNames  map[string]*volumeRec
	ssh       map[string]*sshAccess
	ids       *rand.ChaCha8
	rng       *rand.Rand
	closed    bool
	stopJobs  func() // the crons' (jobs.go)
	handler   http.Handler
	// gateway is the SSH gateway (sshgateway.go); sshPort is the port it
	// serves, 0 until ServeSSH.
	gateway *sshgw.Server
	sshPort atomic.Int32
	// webhooks delivers the events as Daytona's webhooks (webhooks.go);
	// startedAt is when every organization's webhooks were initialized.
	webhooks  *webhooks.Dispatcher
	startedAt time.Time
}

// New returns a running simulator. Close stops it.
func New(cfg Config) (*Simulator, error) {
	cfg = cfg.withDefaults()
	if err := cfg.secure(); err != nil {
		return nil, err
	}
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:], cfg.Seed)
	s := &Simulator{
		cfg:       cfg,
		clk:       cfg.Clock,
		backend:   cfg.Backend,
		snapshots: map[string]Snapshot{},
		rows:      store.New[*sandbox](),
		signed:    map[string]*signedToken{},
		snaps:     map[string]*snapshotRec{},
		snapNames: map[string]*snapshotRec{},
		vols:      map[string]*volumeRec{},
		volNames:  map[string]*volumeRec{},
		ssh:       map[string]*sshAccess{},
		pools:     map[string]*warmPool{},
		poolIndex: map[string]*warmPool{},
		ids:       rand.NewChaCha8(seed),
		rng:       rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		calls:     newCallLog(cfg.CallLogSize),
		orgNames:  newOrgNames(),
		costs:     cost.NewBook(cfg.CostHistory),
	}
	s.eng = reconciler{s}
	_, s.syncWork = cfg.Backend.(backend.None)
	if err := egressOf(s).startEgress(); err != nil {
		return nil, err
	}
	s.faults = faults.NewSet()
	s.snapshots[cfg.DefaultSnapshot] = Snapshot{Name: cfg.DefaultSnapshot, CPU: 1, Memory: 1, Disk: 3}
	for _, sn := range cfg.Snapshots {
		if sn.Name == "*" {
			s.anySnap = true
			continue
		}
		if sn.CPU == 0 && sn.Memory == 0 && sn.Disk == 0 {
			sn.CPU, sn.Memory, sn.Disk = 1, 1, 3
		}
		s.snapshots[sn.Name] = sn
	}
	for _, sn := range s.snapshots {
		snapshotsOf(s).addGeneralSnapshot(sn)
	}
	if !cfg.DisableValidation || cfg.ValidateResponses {
		sp, err := loadSpec(cfg.SpecPath)
		if err != nil {
			return nil, err
		}
		s.spec = sp
	}
	s.events = newEventBus(s.keyOrg)
	wh, err := newWebhooks(s)
	if err != nil {
		return nil, err
	}
	s.webhooks, s.startedAt = wh, s.clk.Now()
	s.events.onWebhook = webhooksOf(s).send
	s.metrics = newSimMetrics(s)
	s.calls.observe = func(c Call) { s.metrics.observe(s, c) }
	s.events.onEmit = func(name string) { s.metrics.events.WithLabelValues(name).Inc() }
	s.bg, s.cancel = context.WithCancel(context.Background())
	gw, err := newSSHGateway(s)
	if err != nil {
		s.cancel()
		return nil, err
	}
	s.gateway = gw
	s.handler = s.routes()
	s.eng.startJobs()
	s.mu.Lock()
	s.eng.defaultPoolLocked()
	s.mu.Unlock()
	return s, nil
}

// Handler serves the API, the toolbox proxy, preview traffic and the admin
// API.
func (s *Simulator) Handler() http.Handler { return s.handler }

// Close stops the jobs, waits for in-flight transitions and removes every
// workload.
func (s *Simulator) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	if s.stopJobs != nil {
		s.stopJobs()
	}
	s.mu.Unlock()
	s.cancel()
	_ = s.gateway.Close()
	s.proxies.close()
	if s.egress != nil {
		_ = s.egress.Close()
	}
	s.wg.Wait()
	s.events.close()
	s.webhooks.Close()
	return s.backend.Close()
}

// newID returns a UUID v4 drawn from the seeded source. Called with s.mu held.
func (s *Simulator) newID() string {
	id, err := uuid.NewRandomFromReader(s.ids)
	if err != nil {
		panic(err) // ChaCha8 never fails
	}
	return id.String()
}

// newToken draws n characters of Daytona's lowercased nanoid alphabet from
// crypto/rand, never from the seeded source: a token is a credential (a
// sandbox's preview and toolbox secret, a signed preview, SSH access), and
// a seed, which tests and --seed share, must not predict it.
func newToken(n int, alphabet string) string {
	b := make([]byte, n)
	// Bytes at or past the last whole multiple of the alphabet's length
	// are drawn again, so that every character is equally likely.
	limit := 256 - 256%len(alphabet)
	var buf [64]byte
	for i := 0; i < n; {
		crand.Read(buf[:]) // never fails
		for _, c := range buf {
			if int(c) < limit && i < n {
				b[i] = alphabet[int(c)%len(alphabet)]
				i++
			}
		}
	}
	return string(b)
}

const (
	authTokenAlphabet = "abcdefghijklmnopqrstuvwxyz0123456789_-"
	signedAlphabet    = "abcdefghijklmnopqrstuvwxyz0123456789"
)

// orgOf is the organization an API key belongs to: a stable UUID derived
// from the key, so that each key sees only its own sandboxes.
func orgOf(key string) string {
	sum := sha256.Sum256([]byte("sandplane-sim-org:" + key))
	id, _ := uuid.FromBytes(sum[:16])
	id[6] = (id[6] & 0x0f) | 0x40
	id[8] = (id[8] & 0x3f) | 0x80
	return id.String()
}

func nameKey(org, name string) string { return org + "\x00" + name }

// lookup resolves id first, then name, inside org. Errored sandboxes that
// are being deleted count as gone. Called with s.mu held.
func (s *Simulator) lookup(org, idOrName string) (*sandbox, *apiError) {
	sb := s.rows.Get(idOrName)
	if sb == nil || sb.OrgID != org {
		sb = s.rows.ByName(org, idOrName)
	}
	if sb == nil || sb.OrgID != org || sb.gone || sb.errored() && sb.Desired == dsDestroyed {
		return nil, notFound(idOrName)
	}
	return sb, nil
}

// lookupID resolves by id only.
func (s *Simulator) lookupID(org, id string) *sandbox {
	sb := s.rows.Get(id)
	if sb == nil || sb.OrgID != org || sb.gone || sb.errored() && sb.Desired == dsDestroyed {
		return nil
	}
	return sb
}

// softDeleteLocked is Daytona's delete: desired destroyed, pending, the name
// freed by renaming.
func (s reconciler) softDeleteLocked(sb *sandbox) {
	now := s.clk.Now()
	sb.Desired = dsDestroyed
	sb.Pending = true
	sb.BackupState = "None"
	sb.UpdatedAt = now
	old := sb.Name
	sb.Name = fmt.Sprintf("DESTROYED_%s_%d", sb.Name, now.UnixMilli())
	s.rows.Renamed(sb, old)
	if sb.errored() {
		sb.Pending = false
	}
	sb.notify()
}

// vanishLocked makes a sandbox disappear out of band, as if an operator
// deleted its row: every later request for it is a 404.
func (s *Simulator) vanishLocked(sb *sandbox) {
	sb.gone = true
	sb.gen++
	sb.busy = false
	enterBilling(sb.ledger, s.clk.Now(), stDestroyed)
	s.rows.Drop(sb)
	sb.notify()
	s.eng.leavePoolLocked(sb)
	s.eng.forgetSecretsLocked(sb.ID)
	if !s.syncWork {
		id := sb.ID
		s.goBackground(func(ctx context.Context) {
			if err := s.backend.Remove(ctx, id); err != nil {
				s.cfg.Logger.Warn("remove the workload of a vanished sandbox", "sandbox", id, "err", err)
			}
		})
	}
}

// goBackground runs f on the background context unless the simulator is
// closing.
func (s *Simulator) goBackground(f func(ctx context.Context)) {
	if s.closed {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f(s.bg)
	}()
}

// baseURL is the public base of the simulator for r.
func (s *Simulator) baseURL(r *http.Request) string {
	if s.cfg.BaseURL != "" {
		return strings.TrimRight(s.cfg.BaseURL, "/")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

func (s *Simulator) toolboxProxyURL(r *http.Request) string { return s.baseURL(r) + "/toolbox" }
