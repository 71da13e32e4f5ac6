package provider_test

import (
	"reflect"
	"sort"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/provider"
)

// TestContractMatchesProvider keeps openapi/controlplane.yaml and the
// Provider interface in step: every operation names the method that carries
// it (x-provider-method, on Provider unless x-provider-interface names an
// optional interface), and every method but Traits is carried by one.
func TestContractMatchesProvider(t *testing.T) {
	spec := loadContract(t, "controlplane.yaml")
	fromSpec := map[string]string{}
	for path, item := range spec.Paths.Map() {
		for method, op := range item.Operations() {
			name, ok := op.Extensions["x-provider-method"].(string)
			require.True(t, ok, "%s %s (%s) names no x-provider-method", method, path, op.OperationID)
			if iface, ok := op.Extensions["x-provider-interface"].(string); ok {
				name = iface + "." + name
			}
			prev, dup := fromSpec[name]
			require.False(t, dup, "%s is named by both %s and %s", name, prev, op.OperationID)
			fromSpec[name] = op.OperationID
		}
	}
	var specMethods, ifaceMethods []string
	for name := range fromSpec {
		specMethods = append(specMethods, name)
	}
	ifaces := map[string]reflect.Type{
		"":         reflect.TypeOf((*provider.Provider)(nil)).Elem(),
		"Watcher.": reflect.TypeOf((*provider.Watcher)(nil)).Elem(),
	}
	for prefix, it := range ifaces {
		for i := 0; i < it.NumMethod(); i++ {
			if name := it.Method(i).Name; name != "Traits" {
				ifaceMethods = append(ifaceMethods, prefix+name)
			}
		}
	}
	sort.Strings(specMethods)
	sort.Strings(ifaceMethods)
	assert.Equal(t, ifaceMethods, specMethods, "operations in openapi/controlplane.yaml and methods of provider.Provider differ")
}

func TestErrorCodesMapToOneStatusEach(t *testing.T) {
	spec := loadContract(t, "wire.yaml")
	for _, v := range spec.Components.Schemas["ErrorCode"].Value.Enum {
		code := provider.ErrorCode(v.(string))
		assert.True(t, provider.Valid(code), "%s has no HTTP status", code)
	}
	tests := []struct {
		code   provider.ErrorCode
		status int
	}{
		{provider.NotFound, 404}, {provider.AlreadyExists, 409}, {provider.InvalidArgument, 400},
		{provider.FailedPrecondition, 409}, {provider.PreflightFailed, 422}, {provider.CreateFailed, 500},
		{provider.Unsupported, 501}, {provider.Unavailable, 503}, {provider.Unauthenticated, 401},
		{provider.PermissionDenied, 403}, {provider.ResourceExhausted, 429}, {provider.Internal, 500},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.status, provider.HTTPStatus(tt.code), tt.code)
	}
}

// loadContract loads a file of openapi/ with the files it refers to.
func loadContract(t *testing.T, name string) *openapi3.T {
	t.Helper()
	loader := openapi3.NewLoader()
	loader.IsExternalRefsAllowed = true
	spec, err := loader.LoadFromFile("../openapi/" + name)
	require.NoError(t, err)
	return spec
}
