package simulator

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/sandplane/sandplane/simulator/internal/secrets"
)

// secretAPI serves an organization's secrets (/secret) and what a sandbox
// mounts of them (PUT and GET /sandbox/{id}/secrets), over the secret
// store. A value is write-only: it is read from a create or update body
// into a secrets.Value, which prints as [REDACTED], and no answer, list,
// call log line or log message carries it; only the egress proxy
// (egress.go) puts it into a sandbox's request to an allowed host.
type secretAPI struct{ *Simulator }

func secretsOf(s *Simulator) secretAPI { return secretAPI{s} }

func secretRoutes() []route {
	return []route{
		{"GET", "/api/secret", "listSecrets", part(secretsOf, secretAPI.listSecrets)},
		{"POST", "/api/secret", "createSecret", part(secretsOf, secretAPI.createSecret)},
		{"GET", "/api/secret/paginated", "listSecretsPaginated", part(secretsOf, secretAPI.listSecretsPaginated)},
		{"GET", "/api/secret/{secretId}", "getSecret", part(secretsOf, secretAPI.getSecret)},
		{"PATCH", "/api/secret/{secretId}", "updateSecret", part(secretsOf, secretAPI.updateSecret)},
		{"DELETE", "/api/secret/{secretId}", "deleteSecret", part(secretsOf, secretAPI.deleteSecret)},
		{"PUT", "/api/sandbox/{sandboxIdOrName}/secrets", "updateSandboxSecrets", part(secretsOf, secretAPI.updateSandboxSecrets)},
		{"GET", "/api/sandbox/{sandboxId}/secrets", "resolveSandboxSecrets", part(secretsOf, secretAPI.resolveSandboxSecrets)},
	}
}

// secretDTO is the Secret schema: everything but the value.
type secretDTO struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	Placeholder string   `json:"placeholder"`
	Hosts       []string `json:"hosts"`
	CreatedAt   string   `json:"createdAt"`
	UpdatedAt   string   `json:"updatedAt"`
}

func secretDTOOf(m secrets.Secret) secretDTO {
	return secretDTO{ID: m.ID, Name: m.Name, Description: m.Description, Placeholder: m.Placeholder,
		Hosts: m.Hosts, CreatedAt: iso(m.CreatedAt), UpdatedAt: iso(m.UpdatedAt)}
}

// secretBody is the CreateSecret and UpdateSecret bodies; Value is held
// as a secrets.Value from the moment it is decoded.
type secretBody struct {
	Name        string       `json:"name"`
	Value       *secretValue `json:"value"`
	Description *string      `json:"description"`
	Hosts       *[]string    `json:"hosts"`
}

// secretValue decodes a JSON string straight into a secrets.Value, so
// that the request's decoded body holds nothing that prints it.
type secretValue struct{ v secrets.Value }

func (sv *secretValue) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New("value must be a string")
	}
	sv.v = secrets.NewValue(s)
	return nil
}

// createSecret is POST /secret: 201 with the secret, 400 for a name,
// value, description or host out of bounds, 409 for a name the
// organization already has.
func (s secretAPI) createSecret(c *call) (reply, *apiError) {
	var req secretBody
	if err := c.decodeBody(&req); err != nil {
		return reply{}, err
	}
	spec := secrets.Spec{Name: req.Name}
	if req.Value != nil {
		spec.Value = req.Value.v
	}
	if req.Description != nil {
		spec.Description = *req.Description
	}
	if req.Hosts != nil {
		spec.Hosts = *req.Hosts
	}
	m, err := s.secrets.Create(c.org, spec)
	if err != nil {
		return reply{}, secretError(err, req.Name)
	}
	return reply{http.StatusCreated, secretDTOOf(m)}, nil
}

// getSecret is GET /secret/{secretId}: the secret without its value, or
// 404.
func (s secretAPI) getSecret(c *call) (reply, *apiError) {
	m, err := s.secrets.Get(c.org, c.params["secretId"])
	if err != nil {
		return reply{}, secretError(err, c.params["secretId"])
	}
	return reply{http.StatusOK, secretDTOOf(m)}, nil
}

// updateSecret is PATCH /secret/{secretId}: a new value is what the proxy
// substitutes from its next request on, and the placeholder stays. 400 or
// 404.
func (s secretAPI) updateSecret(c *call) (reply, *apiError) {
	var req secretBody
	if err := c.decodeBody(&req); err != nil {
		return reply{}, err
	}
	var p secrets.Patch
	if req.Value != nil {
		v := req.Value.v
		p.Value = &v
	}
	p.Description, p.Hosts = req.Description, req.Hosts
	m, err := s.secrets.Update(c.org, c.params["secretId"], p)
	if err != nil {
		return reply{}, secretError(err, c.params["secretId"])
	}
	return reply{http.StatusOK, secretDTOOf(m)}, nil
}

// deleteSecret is DELETE /secret/{secretId}: 204, or 404. Sandboxes that
// mount it keep the variable, whose placeholder is substituted no more.
func (s secretAPI) deleteSecret(c *call) (reply, *apiError) {
	if err := s.secrets.Delete(c.org, c.params["secretId"]); err != nil {
		return reply{}, secretError(err, c.params["secretId"])
	}
	return reply{http.StatusNoContent, nil}, nil
}

// listSecrets is the deprecated GET /secret: every secret of the
// organization, oldest first, without values.
func (s secretAPI) listSecrets(c *call) (reply, *apiError) {
	out := []secretDTO{}
	for _, m := range s.secrets.List(c.org) {
		out = append(out, secretDTOOf(m))
	}
	return reply{http.StatusOK, out}, nil
}

// secretPage is the ListSecretsResponse schema.
type secretPage struct {
	Items      []secretDTO `json:"items"`
	Total      int         `json:"total"`
	NextCursor *string     `json:"nextCursor"`
}

// listSecretsPaginated is GET /secret/paginated: the secrets whose name
// contains name (case-insensitively), sorted by sort (createdAt) in order
// (desc), limit (100) after cursor. A cursor names the last secret of the
// page before; one whose secret is gone is 400.
func (s secretAPI) listSecretsPaginated(c *call) (reply, *apiError) {
	q := c.r.URL.Query()
	limit := 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 200 {
			return reply{}, errorf(http.StatusBadRequest, "limit must be a whole number from 1 to 200")
		}
		limit = n
	}
	list := filterSecrets(s.secrets.List(c.org), q.Get("name"))
	sortSecrets(list, q.Get("sort"), q.Get("order") != "asc")
	start, aerr := cursorStart(list, q.Get("cursor"))
	if aerr != nil {
		return reply{}, aerr
	}
	page := secretPage{Items: []secretDTO{}, Total: len(list)}
	end := min(start+limit, len(list))
	for _, m := range list[start:end] {
		page.Items = append(page.Items, secretDTOOf(m))
	}
	if end < len(list) {
		next := base64.RawURLEncoding.EncodeToString([]byte(list[end-1].ID))
		page.NextCursor = &next
	}
	return reply{http.StatusOK, page}, nil
}

func filterSecrets(list []secrets.Secret, name string) []secrets.Secret {
	if name == "" {
		return list
	}
	name = strings.ToLower(name)
	return slices.DeleteFunc(list, func(m secrets.Secret) bool { return !strings.Contains(strings.ToLower(m.Name), name) })
}

// sortSecrets sorts by field (name, updatedAt, else createdAt), the id
// breaking ties so that a cursor always finds its place.
func sortSecrets(list []secrets.Secret, field string, desc bool) {
	slices.SortStableFunc(list, func(a, b secrets.Secret) int {
		var c int
		switch field {
		case "name":
			c = strings.Compare(a.Name, b.Name)
		case "updatedAt":
			c = a.UpdatedAt.Compare(b.UpdatedAt)
		default:
			c = a.CreatedAt.Compare(b.CreatedAt)
		}
		if c == 0 {
			c = strings.Compare(a.ID, b.ID)
		}
		if desc {
			return -c
		}
		return c
	})
}

func cursorStart(list []secrets.Secret, cursor string) (int, *apiError) {
	if cursor == "" {
		return 0, nil
	}
	id, err := base64.RawURLEncoding.DecodeString(cursor)
	if err == nil {
		for i, m := range list {
			if m.ID == string(id) {
				return i + 1, nil
			}
		}
	}
	return 0, errorf(http.StatusBadRequest, "Invalid cursor: list again from the first page, without a cursor")
}

// secretError is the API error of a store error: 400, 404 or 409, with
// what to do about it. The store's messages name fields, never values.
func secretError(err error, subject string) *apiError {
	status := secrets.HTTPStatus(err)
	switch status {
	case http.StatusNotFound:
		return errorf(status, "Secret %s not found: list the organization's secrets (GET /secret/paginated) for their ids and names", subject)
	case http.StatusConflict:
		return errorf(status, "A secret named %s already exists in this organization: update it (PATCH /secret/{secretId}) or choose another name", subject)
	case http.StatusBadRequest:
		return errorf(status, "%s", strings.TrimPrefix(err.Error(), secrets.ErrInvalid.Error()+": "))
	}
	return errorf(status, "secret store: %v", err)
}

// mountsOf flattens the API's list of {ENV: secretName} objects, the
// shape of CreateSandbox.secrets and UpdateSandboxSecrets.secrets, into
// one map; an env var named twice is 400.
func mountsOf(list []map[string]string) (map[string]string, *apiError) {
	out := map[string]string{}
	for _, entry := range list {
		for env, name := range entry {
			if _, dup := out[env]; dup {
				return nil, errorf(http.StatusBadRequest, "secrets names the env var %s more than once: mount one secret per variable", env)
			}
			out[env] = name
		}
	}
	return out, nil
}

// checkMounts is what a create or update with mounts is refused for: 400
// on a backend whose workloads cannot reach the egress proxy, 400 for an
// env var name, 404 for a secret the organization lacks.
func (s egressPart) checkMounts(org string, mounts map[string]string) *apiError {
	if len(mounts) == 0 {
		return nil
	}
	if aerr := s.egressUsable(); aerr != nil {
		return aerr
	}
	if err := s.secrets.Check(org, mounts); err != nil {
		return mountError(err)
	}
	return nil
}

func mountError(err error) *apiError {
	if errors.Is(err, secrets.ErrNotFound) {
		// The store words it `secret "name"`.
		what := strings.TrimPrefix(err.Error(), secrets.ErrNotFound.Error()+": secret ")
		return errorf(http.StatusNotFound, "Secret %s not found: create it (POST /secret) before mounting it in a sandbox", what)
	}
	return secretError(err, "")
}

// updateSandboxSecrets is PUT /sandbox/{id}/secrets: the set replaces
// what the sandbox mounts (an empty one detaches all), in force for the
// proxy's next request. A running workload's processes started after it
// see the new variables; one started without secrets has no proxy, which
// the answer's X-Sandplane-Warning says (restart it, as Daytona asks).
// 400, 404 as checkMounts; the answer is the sandbox.
func (s secretAPI) updateSandboxSecrets(c *call) (reply, *apiError) {
	var req struct {
		Secrets []map[string]string `json:"secrets"`
	}
	if err := c.decodeBody(&req); err != nil {
		return reply{}, err
	}
	mounts, aerr := mountsOf(req.Secrets)
	if aerr != nil {
		return reply{}, aerr
	}
	if aerr := egressOf(s.Simulator).checkMounts(c.org, mounts); aerr != nil {
		return reply{}, aerr
	}
	tbx := s.toolboxProxyURL(c.r)
	var running, proxied bool
	var id string
	rep, aerr := s.withSandbox(c, func(sb *sandbox) (reply, *apiError) {
		before := s.secrets.Mounts(sb.ID)
		if err := s.secrets.Mount(c.org, sb.ID, mounts); err != nil {
			return reply{}, mountError(err)
		}
		sb.UpdatedAt = s.clk.Now()
		id, running, proxied = sb.ID, sb.State == stStarted && sb.toolboxURL != "", sb.egress
		s.eng.pushEnvLater(sb.ID, before)
		return reply{http.StatusOK, sb.dto(tbx, false)}, nil
	})
	if aerr != nil {
		return rep, aerr
	}
	if running && len(mounts) > 0 && !proxied && s.egress != nil {
		c.w.Header().Add(warningHeader, "sandbox "+id+" was started without secrets, so its processes have no egress proxy: restart it for its secrets to work")
	}
	return rep, nil
}

// resolvedSecret is resolveSandboxSecrets_200_response_inner without its
// value.
type resolvedSecret struct {
	Env         string   `json:"env"`
	Placeholder string   `json:"placeholder"`
	Hosts       []string `json:"hosts"`
}

// resolveSandboxSecrets is GET /sandbox/{sandboxId}/secrets: what the
// sandbox mounts, env var by env var, with each placeholder and its
// allowed hosts, to a caller of the sandbox's organization (404 for any
// other).
//
// The spec calls these "decrypted secret key-value pairs" and gives each
// a value: in Daytona this is what the sandbox's egress layer asks to
// learn what to substitute. No SDK calls it, and here that layer is the
// simulator's own proxy, which reads the store in process; so no caller
// needs a value, and the simulator never answers one: with it, any holder
// of the organization's key (a sandbox handed one included) would read
// every value the write-only API refuses to return. The schema does not
// require value, so the answer still validates.
func (s secretAPI) resolveSandboxSecrets(c *call) (reply, *apiError) {
	s.mu.RLock()
	sb, aerr := s.lookup(c.org, c.params["sandboxId"])
	s.mu.RUnlock()
	if aerr != nil {
		return reply{}, aerr
	}
	c.sandboxID = sb.ID
	out := []resolvedSecret{}
	for _, m := range s.secrets.Mounted(sb.ID) {
		out = append(out, resolvedSecret{Env: m.Env, Placeholder: m.Placeholder, Hosts: m.Hosts})
	}
	return reply{http.StatusOK, out}, nil
}
