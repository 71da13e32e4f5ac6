package simulator

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"testing"

	apiclient "github.com/daytonaio/daytona/libs/api-client-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Coverage of the embedded Daytona API document, operation by operation.
const (
	// covered: the simulator serves it.
	covered = "implemented"
	// proxied: a deprecated toolbox route of the API, served by the toolbox
	// proxy (the toolbox answers what it implements; computer use says it
	// is not available).
	proxied = "implemented (toolbox proxy)"
	// unavailable: answered as Daytona answers when the feature is not
	// there.
	unavailable = "answered as unavailable"
	// outOfScope: not served (404); the reason says why.
	outOfScope = "out of scope"
)

// outOfScopeTags are whole areas of the API that concern operating
// Daytona, not using sandboxes.
var outOfScopeTags = map[string]string{
	"organizations":   "organizations, members, roles, invitations, quotas and regions are account management: each API key is its own organization",
	"users":           "user accounts are the dashboard's",
	"api-keys":        "API keys are accepted as configured (--api-key), not managed through the API",
	"runners":         "runners are Daytona's infrastructure: the simulator is its own runner",
	"admin":           "administration of a Daytona deployment",
	"jobs":            "the runner job queue is internal to Daytona",
	"docker-registry": "registries are the engine's business: the docker backend uses the images the engine has",
	"webhooks":        "webhook delivery (Svix) is not simulated; the same events go to the socket.io gateway",
	"audit":           "audit logs are an organization feature",
	"preview":         "these are the proxy's calls to the API; the simulator is its own proxy",
	"regions":         "regions are account management: the simulator has its configured targets",
	"config":          "dashboard configuration (OIDC, analytics, links)",
}

// outOfScopeOps are single operations outside the areas above.
var outOfScopeOps = map[string]string{
	"getSandboxesForRunner":                       "a runner's call",
	"updateSandboxState":                          "a runner's call",
	"getOrganizationBySandboxId":                  "the proxy's call",
	"getRegionQuotaBySandboxId":                   "the proxy's call",
	"getOrganizationOtelConfigBySandboxAuthToken": "a sandbox daemon's call",
}

// unavailableOps are answered as a Daytona without the feature answers.
var unavailableOps = map[string]bool{
	"getPushAccess": true,
}

// sdkOps are the operations of the document that the official SDKs call:
// @daytonaio/sdk 0.190.1 and 0.218.0, daytona (Python) and the Go SDK of
// v0.190.0 (the deprecated toolbox routes aside, which older SDKs call).
var sdkOps = []string{
	"listSandboxes", "createSandbox", "getSandbox", "deleteSandbox", "startSandbox", "stopSandbox", "pauseSandbox",
	"archiveSandbox", "recoverSandbox", "resizeSandbox", "replaceLabels", "setAutostopInterval",
	"setAutoArchiveInterval", "setAutoDeleteInterval", "updateLastActivity", "updatePublicStatus",
	"getPortPreviewUrl", "getSignedPortPreviewUrl", "expireSignedPortPreviewUrl", "getToolboxProxyUrl",
	"getBuildLogsUrl", "getBuildLogs", "createBackup", "createSandboxSnapshot", "forkSandbox",
	"updateNetworkSettings", "createSshAccess", "revokeSshAccess", "validateSshAccess", "getSandboxMetrics",
	"getSandboxLogs", "getSandboxTraces", "getSandboxTraceSpans", "listSandboxesPaginated_deprecated",
	"getAllSnapshots", "createSnapshot", "getSnapshot", "removeSnapshot", "activateSnapshot", "deactivateSnapshot",
	"getSnapshotBuildLogsUrl", "getSnapshotBuildLogs", "listVolumes", "createVolume", "getVolume",
	"getVolumeByName", "deleteVolume", "getPushAccess", "HealthController_live", "HealthController_check",
	"ConfigController_getConfig",
}

// newerOps are the operations the simulator serves beyond the embedded
// document, which releases of the SDKs after v0.190.0 call, each with what
// calls it. No document the simulator has describes them, so their
// requests and responses are not validated; a test fails when the embedded
// document gains one, which is then validated like every other.
var newerOps = map[string]string{
	"getSandboxSigningKey": "@daytonaio/sdk 0.218.0: sandbox.downloadUrl and uploadUrl sign with it",
	"rotateSigningKey":     "@daytonaio/sdk 0.218.0: sandbox.rotateSigningKey",
}

type opStatus struct {
	ID, Method, Path, Status, Reason string
	Deprecated                       bool
}

// classify puts every operation of the embedded document in one status.
func classify(t *testing.T) []opStatus {
	t.Helper()
	doc, err := parseSpec("")
	require.NoError(t, err)
	served := map[string]bool{"HealthController_live": true}
	for _, rt := range apiRoutes() {
		served[rt.op] = true
	}
	var out []opStatus
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			st := opStatus{ID: op.OperationID, Method: method, Path: path, Deprecated: op.Deprecated}
			tag := ""
			if len(op.Tags) > 0 {
				tag = op.Tags[0]
			}
			switch {
			case unavailableOps[op.OperationID] && served[op.OperationID]:
				st.Status = unavailable
			case served[op.OperationID]:
				st.Status = covered
			case strings.HasPrefix(path, "/toolbox/{sandboxId}/toolbox/"):
				st.Status = proxied
			case outOfScopeOps[op.OperationID] != "":
				st.Status, st.Reason = outOfScope, outOfScopeOps[op.OperationID]
			case outOfScopeTags[tag] != "":
				st.Status, st.Reason = outOfScope, outOfScopeTags[tag]
			}
			out = append(out, st)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path+out[i].Method < out[j].Path+out[j].Method })
	return out
}

func TestEveryOperationHasAStatus(t *testing.T) {
	ops := classify(t)
	counts := map[string]int{}
	live := 0
	byID := map[string]opStatus{}
	for _, op := range ops {
		byID[op.ID] = op
		assert.NotEmpty(t, op.Status, "%s %s (%s) is neither served nor out of scope with a reason", op.Method, op.Path, op.ID)
		counts[op.Status]++
		if !op.Deprecated && (op.Status == covered || op.Status == proxied || op.Status == unavailable) {
			live++
		}
	}
	for _, id := range sdkOps {
		op, ok := byID[id]
		if assert.True(t, ok, "%s is not in the document", id) {
			assert.Contains(t, []string{covered, unavailable}, op.Status, "the SDKs call %s", id)
		}
	}
	notDeprecated := 0
	for _, op := range ops {
		if !op.Deprecated {
			notDeprecated++
		}
	}
	summary := fmt.Sprintf("simulator: %d of %d operations answered (%d implemented, %d through the toolbox proxy, %d as unavailable), %d of the %d not deprecated; %d out of scope; all %d the SDKs call; %d beyond the document that newer SDKs call",
		counts[covered]+counts[proxied]+counts[unavailable], len(ops), counts[covered], counts[proxied], counts[unavailable],
		live, notDeprecated, counts[outOfScope], len(sdkOps), len(newerOps))
	t.Log(summary)
	fmt.Println(summary)
}

// Every served operation is routed: a request to its path reaches a
// handler (whatever it answers), never the catch-all "Cannot GET".
func TestEveryServedOperationIsRouted(t *testing.T) {
	h := newHarness(t)
	sb := h.create(apiclient.CreateSandbox{})
	param := regexp.MustCompile(`\{[^}]+\}`)
	for _, op := range classify(t) {
		if op.Status != covered && op.Status != unavailable {
			continue
		}
		t.Run(op.ID, func(t *testing.T) {
			path := "/api" + param.ReplaceAllStringFunc(op.Path, func(p string) string {
				switch p {
				case "{sandboxIdOrName}", "{sandboxId}":
					return sb.Id
				case "{port}":
					return "3000"
				case "{interval}":
					return "5"
				case "{isPublic}":
					return "false"
				}
				return "x"
			})
			code, body, _ := h.raw(op.Method, path, nil)
			var e nestBody
			_ = json.Unmarshal(body, &e)
			assert.False(t, code == http.StatusNotFound && strings.HasPrefix(e.Message, "Cannot "), "%s %s is not routed: %s", op.Method, path, body)
		})
	}
}

// Every route the simulator serves is an operation of the embedded
// document or one of newerOps, and newerOps are not in the document.
func TestNewerOperationsAreServedBeyondTheDocument(t *testing.T) {
	doc, err := parseSpec("")
	require.NoError(t, err)
	inDoc := map[string]bool{}
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			inDoc[op.OperationID] = true
		}
	}
	served := map[string]bool{}
	for _, rt := range apiRoutes() {
		served[rt.op] = true
		if !inDoc[rt.op] {
			assert.Contains(t, newerOps, rt.op, "%s %s is neither in the document nor listed in newerOps", rt.method, rt.pattern)
		}
	}
	for op := range newerOps {
		assert.True(t, served[op], "%s is listed but not served", op)
		assert.False(t, inDoc[op], "the document now has %s: drop it from newerOps, and it is validated", op)
	}
}
