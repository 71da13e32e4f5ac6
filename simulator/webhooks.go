package simulator

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/sandplane/sandplane/simulator/internal/faults"
	"github.com/sandplane/sandplane/simulator/internal/webhooks"
)

// webhookAPI sends Daytona's webhooks for the simulator's events, through
// internal/webhooks (Svix's delivery), and answers the webhook routes of the
// API and the admin API's /_sim/webhooks.
//
// Daytona sends, for an organization with webhooks initialized, the seven
// event types below, each payload built from the event alone: the socket.io
// events that are not webhooks (sandbox.desired-state.updated,
// volume.last-used-at.updated) are not sent. Every organization of the
// simulator counts as initialized, and every endpoint of Config.Webhooks
// (or of the admin API) is an endpoint of each.
type webhookAPI struct{ *Simulator }

func webhooksOf(s *Simulator) webhookAPI { return webhookAPI{s} }

// newWebhooks is the simulator's dispatcher, with its faults and its
// minute.
func newWebhooks(s *Simulator) (*webhooks.Dispatcher, error) {
	return webhooks.New(webhooks.Config{
		Endpoints: s.cfg.Webhooks,
		Secret:    s.cfg.WebhookSecret,
		Clock:     s.clk,
		Scale:     float64(s.cfg.Minute) / float64(time.Minute),
		Fault:     webhooksOf(s).fault,
	})
}

// fault is the scripted webhook fault of a delivery, if any: one for the
// organization, or for the sandbox, snapshot or volume it is about.
func (s webhookAPI) fault(m webhooks.Message) (webhooks.Fault, bool) {
	ft, ok := s.faults.Match(faults.OpWebhook, m.Org, m.Subject)
	if !ok {
		return webhooks.Fault{}, false
	}
	return webhooks.Fault{Drop: ft.Drop, Duplicate: ft.Duplicate, Delay: time.Duration(ft.Delay)}, true
}

// send sends the webhook of an event the event bus emits, if it is one.
// Called with s.mu held: the dispatcher only queues.
func (s webhookAPI) send(org, name string, data any) {
	payload, id, ok := webhookPayload(name, data, iso(s.clk.Now()))
	if !ok {
		return
	}
	if _, err := s.webhooks.Send(webhooks.Message{Org: org, EventType: name, Subject: id, Payload: payload}); err != nil {
		s.cfg.Logger.Error("webhook not sent", "event", name, "error", err)
	}
}

// The payloads of Daytona's webhooks, by event type.
type (
	webhookBase struct {
		Event     string `json:"event"`
		Timestamp string `json:"timestamp"`
	}
	sandboxCreatedWebhook struct {
		webhookBase
		ID             string `json:"id"`
		OrganizationID string `json:"organizationId"`
		State          string `json:"state"`
		SandboxClass   string `json:"sandboxClass"`
		CreatedAt      string `json:"createdAt"`
	}
	stateUpdatedWebhook struct {
		webhookBase
		ID             string `json:"id"`
		Name           string `json:"name,omitempty"`
		OrganizationID string `json:"organizationId"`
		OldState       string `json:"oldState"`
		NewState       string `json:"newState"`
		UpdatedAt      string `json:"updatedAt"`
	}
	namedCreatedWebhook struct {
		webhookBase
		ID             string `json:"id"`
		Name           string `json:"name"`
		OrganizationID string `json:"organizationId"`
		State          string `json:"state"`
		CreatedAt      string `json:"createdAt"`
	}
	snapshotRemovedWebhook struct {
		webhookBase
		ID             string `json:"id"`
		Name           string `json:"name"`
		OrganizationID string `json:"organizationId"`
		RemovedAt      string `json:"removedAt"`
	}
)

// webhookPayload is the webhook of the event name with data (the socket.io
// payload), at now, and the id of what it is about; ok is false for
// events that are not webhooks.
func webhookPayload(name string, data any, now string) (payload any, id string, ok bool) {
	base := webhookBase{Event: name, Timestamp: now}
	switch d := data.(type) {
	case sandboxDTO:
		if name != EventSandboxCreated {
			return nil, "", false
		}
		return sandboxCreatedWebhook{base, d.ID, d.OrganizationID, d.State, d.SandboxClass, d.CreatedAt}, d.ID, true
	case sandboxStateEvent:
		sb := d.Sandbox
		return stateUpdatedWebhook{base, sb.ID, "", sb.OrganizationID, d.OldState, d.NewState, sb.UpdatedAt}, sb.ID, true
	case snapshotEvent:
		sn := d.Snapshot
		return stateUpdatedWebhook{base, sn.ID, sn.Name, sn.OrganizationID, d.OldState, d.NewState, sn.UpdatedAt}, sn.ID, true
	case snapshotDTO:
		switch name {
		case EventSnapshotCreated:
			return namedCreatedWebhook{base, d.ID, d.Name, d.OrganizationID, d.State, d.CreatedAt}, d.ID, true
		case EventSnapshotRemoved:
			return snapshotRemovedWebhook{base, d.ID, d.Name, d.OrganizationID, now}, d.ID, true
		}
	case volumeEvent:
		v := d.Volume
		return stateUpdatedWebhook{base, v.ID, v.Name, v.OrganizationID, d.OldState, d.NewState, v.UpdatedAt}, v.ID, true
	case volumeDTO:
		if name == EventVolumeCreated {
			return namedCreatedWebhook{base, d.ID, d.Name, d.OrganizationID, d.State, d.CreatedAt}, d.ID, true
		}
	}
	return nil, "", false
}

// webhookStatus is GET /_sim/webhooks: where deliveries go and every
// attempt, oldest first. The secret is not in it: it was printed at start,
// and PUT replaces it.
type webhookStatus struct {
	Endpoints []string           `json:"endpoints"`
	Attempts  []webhooks.Attempt `json:"attempts"`
}

// webhookSettings is the body of PUT /_sim/webhooks: what it names is
// replaced.
type webhookSettings struct {
	Endpoints *[]string `json:"endpoints"`
	Secret    *string   `json:"secret"`
}

// status answers GET /_sim/webhooks, the attempts of sc's organizations.
func (s webhookAPI) status(sc scope) webhookStatus {
	st := webhookStatus{Endpoints: s.webhooks.Endpoints(), Attempts: []webhooks.Attempt{}}
	for _, a := range s.webhooks.Attempts() {
		if sc.owns(a.Organization) {
			st.Attempts = append(st.Attempts, a)
		}
	}
	return st
}

func (a adminAPI) webhookStatus(w http.ResponseWriter, _ *http.Request, sc scope, _ bool) {
	writeJSON(w, http.StatusOK, webhooksOf(a.s).status(sc))
}

// setWebhooks is PUT /_sim/webhooks. The endpoints and the secret are every
// organization's, so only an org=all call changes them.
func (a adminAPI) setWebhooks(w http.ResponseWriter, r *http.Request, sc scope, _ bool) {
	in, aerr := decodeWebhookSettings(r, sc)
	if aerr == nil {
		aerr = webhooksOf(a.s).set(in)
	}
	if aerr != nil {
		a.s.writeAPIError(w, r, aerr)
		return
	}
	writeJSON(w, http.StatusOK, webhooksOf(a.s).status(sc))
}

// decodeWebhookSettings reads the body of PUT /_sim/webhooks.
func decodeWebhookSettings(r *http.Request, sc scope) (webhookSettings, *apiError) {
	var in webhookSettings
	if !sc.all {
		return in, errorf(http.StatusBadRequest, "the webhook endpoints and secret are every organization's: call with ?%s=%s", AdminOrgParam, AllOrgs)
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return in, errorf(http.StatusBadRequest, `invalid webhook settings: %v (want {"endpoints": ["http://..."], "secret": "whsec_..."})`, err)
	}
	return in, nil
}

// set applies PUT /_sim/webhooks.
func (s webhookAPI) set(in webhookSettings) *apiError {
	if in.Endpoints == nil && in.Secret == nil {
		return errorf(http.StatusBadRequest, `give "endpoints" (a list of URLs), "secret" (whsec_...), or both`)
	}
	if in.Secret != nil {
		if err := s.webhooks.SetSecret(*in.Secret); err != nil {
			return errorf(http.StatusBadRequest, "%v", err)
		}
	}
	if in.Endpoints != nil {
		if err := s.webhooks.SetEndpoints(*in.Endpoints); err != nil {
			return errorf(http.StatusBadRequest, "%v", err)
		}
	}
	return nil
}

// webhookRoutes are the webhooks tag of the API: an organization's Svix
// application, which every organization of the simulator has.
func webhookRoutes() []route {
	const org = "/api/webhooks/organizations/{organizationId}"
	return []route{
		{"GET", org + "/initialization-status", "WebhookController_getInitializationStatus", part(webhooksOf, webhookAPI.initializationStatus)},
		{"POST", org + "/initialize", "WebhookController_initializeWebhooks", part(webhooksOf, webhookAPI.initialize)},
		{"POST", org + "/refresh-endpoints", "WebhookController_refreshEndpoints", part(webhooksOf, webhookAPI.refreshEndpoints)},
		{"POST", org + "/app-portal-access", "WebhookController_getAppPortalAccess", part(webhooksOf, webhookAPI.appPortalAccess)},
	}
}

// webhookInitialization is Daytona's WebhookInitializationStatus.
type webhookInitialization struct {
	OrganizationID    string  `json:"organizationId"`
	SvixApplicationID *string `json:"svixApplicationId"`
	LastError         *string `json:"lastError"`
	RetryCount        int     `json:"retryCount"`
	CreatedAt         string  `json:"createdAt"`
	UpdatedAt         string  `json:"updatedAt"`
}

// ownOrg is the organization of the path, which must be the caller's, as
// Daytona's organization guard requires.
func (s webhookAPI) ownOrg(c *call) (string, *apiError) {
	org := c.params["organizationId"]
	if org != c.org {
		return "", errorf(http.StatusForbidden, "Forbidden resource: organization %s is not the one of this API key", org)
	}
	return org, nil
}

func (s webhookAPI) initializationStatus(c *call) (reply, *apiError) {
	org, e := s.ownOrg(c)
	if e != nil {
		return reply{}, e
	}
	app := "app_" + strings.ReplaceAll(org, "-", "")
	at := iso(s.startedAt)
	return reply{http.StatusOK, webhookInitialization{OrganizationID: org, SvixApplicationID: &app, CreatedAt: at, UpdatedAt: at}}, nil
}

// initialize answers as for an organization initialized already.
func (s webhookAPI) initialize(c *call) (reply, *apiError) {
	rep, e := s.initializationStatus(c)
	rep.status = http.StatusCreated
	return rep, e
}

func (s webhookAPI) refreshEndpoints(c *call) (reply, *apiError) {
	if _, e := s.ownOrg(c); e != nil {
		return reply{}, e
	}
	return reply{status: http.StatusNoContent}, nil
}

// appPortalAccess has no Svix portal to open: the simulator's deliveries
// are in its admin API, which the warning names.
func (s webhookAPI) appPortalAccess(c *call) (reply, *apiError) {
	org, e := s.ownOrg(c)
	if e != nil {
		return reply{}, e
	}
	c.w.Header().Add(warningHeader, "the simulator has no Svix app portal: its webhook deliveries are at GET /_sim/webhooks (admin key)")
	return reply{http.StatusOK, map[string]string{"token": "", "url": s.baseURL(c.r) + "/_sim/webhooks?" + AdminOrgParam + "=" + org}}, nil
}
