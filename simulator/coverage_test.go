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
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Coverage of the embedded Daytona API documents, operation by operation:
// the primary one (v0.205.1) and the legacy one (v0.190.0), whose
// operations the primary lacks are the deprecated toolbox routes.
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
	// notYet: not served (404) yet; planned, the reason says what for.
	notYet = "not yet"
)

// outOfScopeTags are whole areas of the API that concern operating
// Daytona, not using sandboxes.
var outOfScopeTags = map[string]string{
	"organizations":   "organizations, members, roles, invitations, quotas, regions and identity providers are account management: each API key is its own organization",
	"users":           "user accounts (and their SSO links) are the dashboard's",
	"api-keys":        "API keys are accepted as configured (--api-key), not managed through the API",
	"runners":         "runners are Daytona's infrastructure: the simulator is its own runner",
	"admin":           "administration of a Daytona deployment",
	"jobs":            "the runner job queue is internal to Daytona",
	"docker-registry": "registries are the engine's business: the docker backend uses the images the engine has",
	"audit":           "audit logs are an organization feature",
	"regions":         "regions are account management: the simulator has its configured targets",
	"config":          "dashboard configuration (OIDC, analytics, links)",
}

// notYetTags are areas of the newest API the simulator is to serve but
// does not yet: a request to them is the catch-all 404.
var notYetTags = map[string]string{}

// notYetOps are single operations of the newest API not yet served.
var notYetOps = map[string]string{}

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

// sdkOps are the operations of the primary document that the official
// SDKs call: @daytonaio/sdk 0.190.1 and 0.218.0, daytona (Python) and the
// Go SDK of v0.190.0 (the deprecated toolbox routes aside, which older SDKs
// call), but those notYetOps and notYetTags list.
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
	"ConfigController_getConfig", "getSandboxSigningKey", "rotateSigningKey", "setTtl",
	"listWarmPools", "createWarmPool", "updateWarmPool", "deleteWarmPool",
}

type opStatus struct {
	ID, Method, Path, Status, Reason string
	Deprecated                       bool
}

// docs are the embedded documents, primary first.
func docs(t *testing.T) map[string]*openapi3.T {
	t.Helper()
	primary, err := parseSpec("")
	require.NoError(t, err)
	legacy, err := parseLegacySpec()
	require.NoError(t, err)
	return map[string]*openapi3.T{SpecVersion(): primary, LegacySpecVersion(): legacy}
}

// classify puts every operation of doc in one status.
func classify(doc *openapi3.T) []opStatus {
	served := map[string]bool{"HealthController_live": true}
	for _, rt := range apiRoutes() {
		served[rt.op] = true
	}
	var out []opStatus
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			st := opStatus{ID: op.OperationID, Method: method, Path: path, Deprecated: op.Deprecated}
			st.Status, st.Reason = statusOf(op, path, served)
			out = append(out, st)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path+out[i].Method < out[j].Path+out[j].Method })
	return out
}

func statusOf(op *openapi3.Operation, path string, served map[string]bool) (status, reason string) {
	tag := ""
	if len(op.Tags) > 0 {
		tag = op.Tags[0]
	}
	id := op.OperationID
	switch {
	case unavailableOps[id] && served[id]:
		return unavailable, ""
	case served[id]:
		return covered, ""
	case strings.HasPrefix(path, "/toolbox/{sandboxId}/toolbox/"):
		return proxied, ""
	case notYetOps[id] != "":
		return notYet, notYetOps[id]
	case outOfScopeOps[id] != "":
		return outOfScope, outOfScopeOps[id]
	case notYetTags[tag] != "":
		return notYet, notYetTags[tag]
	case outOfScopeTags[tag] != "":
		return outOfScope, outOfScopeTags[tag]
	}
	return "", ""
}

// Every operation of each embedded document is served or listed with a
// reason, and every operation the SDKs call is served.
func TestEveryOperationHasAStatus(t *testing.T) {
	all := docs(t)
	for _, version := range []string{SpecVersion(), LegacySpecVersion()} {
		t.Run(version, func(t *testing.T) {
			ops := classify(all[version])
			byID := map[string]opStatus{}
			for _, op := range ops {
				byID[op.ID] = op
				assert.NotEmpty(t, op.Status, "%s %s (%s) is neither served nor listed with a reason", op.Method, op.Path, op.ID)
			}
			if version == SpecVersion() {
				for _, id := range sdkOps {
					op, ok := byID[id]
					if assert.True(t, ok, "%s is not in the document", id) {
						assert.Contains(t, []string{covered, unavailable}, op.Status, "the SDKs call %s", id)
					}
				}
			}
			summary := coverageSummary(version, ops)
			t.Log(summary)
			fmt.Println(summary)
		})
	}
}

func coverageSummary(version string, ops []opStatus) string {
	counts := map[string]int{}
	live, notDeprecated := 0, 0
	for _, op := range ops {
		counts[op.Status]++
		if !op.Deprecated {
			notDeprecated++
			if op.Status == covered || op.Status == proxied || op.Status == unavailable {
				live++
			}
		}
	}
	return fmt.Sprintf("simulator, Daytona %s: %d of %d operations answered (%d implemented, %d through the toolbox proxy, %d as unavailable), %d of the %d not deprecated; %d not yet; %d out of scope",
		version, counts[covered]+counts[proxied]+counts[unavailable], len(ops), counts[covered], counts[proxied], counts[unavailable],
		live, notDeprecated, counts[notYet], counts[outOfScope])
}

// Every served operation is routed: a request to its path reaches a
// handler (whatever it answers), never the catch-all "Cannot GET".
func TestEveryServedOperationIsRouted(t *testing.T) {
	h := newHarness(t)
	sb := h.create(apiclient.CreateSandbox{})
	param := regexp.MustCompile(`\{[^}]+\}`)
	for _, op := range classify(docs(t)[SpecVersion()]) {
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

// Every route the simulator serves is an operation of an embedded document,
// at the method and path the document gives it: of the primary one when
// that has it. And the lists name only operations of the primary document
// that are not served, so that serving one drops it from them.
func TestEveryRouteIsADocumentedOperation(t *testing.T) {
	all := docs(t)
	where := map[string]string{}
	for _, version := range []string{LegacySpecVersion(), SpecVersion()} {
		for path, item := range all[version].Paths.Map() {
			for method, op := range item.Operations() {
				where[op.OperationID] = method + " /api" + path
			}
		}
	}
	served := map[string]bool{}
	for _, rt := range apiRoutes() {
		served[rt.op] = true
		if assert.Contains(t, where, rt.op, "%s %s is in no embedded document", rt.method, rt.pattern) {
			assert.Equal(t, where[rt.op], rt.method+" "+rt.pattern, "the route of %s", rt.op)
		}
	}
	primary := map[string]bool{}
	for _, op := range classify(all[SpecVersion()]) {
		primary[op.ID] = true
	}
	for id := range notYetOps {
		assert.True(t, primary[id], "notYetOps lists %s, which the document does not have", id)
		assert.False(t, served[id], "%s is served: drop it from notYetOps", id)
	}
	for id := range outOfScopeOps {
		assert.False(t, served[id], "%s is served: drop it from outOfScopeOps", id)
	}
}
