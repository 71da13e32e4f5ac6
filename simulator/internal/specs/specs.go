package specs

import _ "embed"

// Module paths and the pinned version of the documents.
const (
	APIClientModule     = "github.com/daytonaio/daytona/libs/api-client-go"
	ToolboxClientModule = "github.com/daytonaio/daytona/libs/toolbox-api-client-go"
)

// API is api/openapi.yaml of APIClientModule at Version: the Daytona REST
// API.
//
//go:embed daytona-api.yaml
var API []byte

// Toolbox is api/openapi.yaml of ToolboxClientModule at Version: the API of
// the in-sandbox toolbox.
//
//go:embed daytona-toolbox-api.yaml
var Toolbox []byte

// Version is the module version both documents were copied from.
//
//go:embed VERSION
var version string

// Version returns the module version the documents were copied from, such
// as v0.190.0.
func Version() string { return trimNewline(version) }

func trimNewline(s string) string {
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == '\r') {
		s = s[:len(s)-1]
	}
	return s
}
