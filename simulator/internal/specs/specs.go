package specs

import _ "embed"

// Module paths and the pinned version of the documents copied from Go
// modules.
const (
	APIClientModule     = "github.com/daytonaio/daytona/libs/api-client-go"
	ToolboxClientModule = "github.com/daytonaio/daytona/libs/toolbox-api-client-go"
)

// API is the newest Daytona REST API document the simulator knows:
// api-client-go/api/openapi.yaml of github.com/daytona/clients at
// LatestVersion (clients/SOURCE says where exactly). It is the primary
// document: every operation it has is validated against it.
//
//go:embed clients/daytona-api.yaml
var API []byte

// LegacyAPI is api/openapi.yaml of APIClientModule at Version: the Daytona
// REST API of the release the Go api-client in go.mod is. It serves the
// operations API no longer has, such as the deprecated toolbox routes
// older SDKs call.
//
//go:embed daytona-api.yaml
var LegacyAPI []byte

// Toolbox is api/openapi.yaml of ToolboxClientModule at Version: the API of
// the in-sandbox toolbox.
//
//go:embed daytona-toolbox-api.yaml
var Toolbox []byte

// Version is the module version LegacyAPI and Toolbox were copied from.
//
//go:embed VERSION
var version string

//go:embed clients/VERSION
var latestVersion string

// Source records where API came from: repository, tag, commit, path, git
// blob and licence.
//
//go:embed clients/SOURCE
var Source string

// Version returns the module version LegacyAPI and Toolbox were copied
// from, such as v0.190.0.
func Version() string { return trimNewline(version) }

// LatestVersion returns the release API was copied from, such as v0.205.1.
func LatestVersion() string { return trimNewline(latestVersion) }

func trimNewline(s string) string {
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == '\r') {
		s = s[:len(s)-1]
	}
	return s
}
