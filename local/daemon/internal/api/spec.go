package api

import (
	"fmt"
	"io/fs"
	"net/url"
	"path"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/sandplane/sandplane/openapi"
)

// Spec loads the embedded contract with its schemas resolved, for request
// validation. oapi-codegen's own embedded spec would resolve wire.yaml through
// provider/wire, which would then have to carry the spec and kin-openapi
// with it; the daemon embeds the two files instead (package openapi).
func Spec() (*openapi3.T, error) {
	loader := openapi3.NewLoader()
	loader.IsExternalRefsAllowed = true
	loader.ReadFromURIFunc = func(_ *openapi3.Loader, u *url.URL) ([]byte, error) {
		return fs.ReadFile(openapi.Files, path.Clean(u.Path))
	}
	spec, err := loader.LoadFromURI(&url.URL{Path: openapi.Root})
	if err != nil {
		return nil, fmt.Errorf("load the embedded contract: %w", err)
	}
	if err := spec.Validate(loader.Context); err != nil {
		return nil, fmt.Errorf("the embedded contract is invalid: %w", err)
	}
	return spec, nil
}
