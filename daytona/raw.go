package daytona

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// apiError is a non-2xx answer to a raw call, shaped for serverMessage as
// the api-client's own errors are: its body holds Daytona's message.
type apiError struct {
	status string
	body   []byte
}

func (e *apiError) Error() string { return e.status }

// Body is the answer's body, as the api-client's GenericOpenAPIError has.
func (e *apiError) Body() []byte { return e.body }

// raw sends a request the pinned api-client (v0.190) has no method for:
// routes Daytona added since (v0.205.1's TTL, auto-pause, secrets and
// warm pools), and the toolbox's entrypoint logs (rawAt). It is the one
// such place. The request goes as the client's
// would: to its server URL, through its HTTP client (so with the retry
// transport), with its user agent, its default headers and the API key.
// in (unless nil) is the JSON body and a 2xx answer is decoded into out
// (unless nil). The returned response and error are what classify takes.
func (p *Provider) raw(ctx context.Context, method, path string, in, out any) (*http.Response, error) {
	return p.rawAt(ctx, method, strings.TrimRight(p.api.GetConfig().Servers[0].URL, "/")+path, in, out)
}

// rawAt is raw to a whole URL: a sandbox's toolbox behind Daytona's proxy,
// which takes the API key as the API does.
func (p *Provider) rawAt(ctx context.Context, method, url string, in, out any) (*http.Response, error) {
	cfg := p.api.GetConfig()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("encode the request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return nil, err
	}
	for k, v := range cfg.DefaultHeader {
		req.Header.Set(k, v)
	}
	req.Header.Set("User-Agent", cfg.UserAgent)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Authorization", "Bearer "+p.cfg.APIKey)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp, err
	}
	if resp.StatusCode >= 300 {
		return resp, &apiError{status: resp.Status, body: data}
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return resp, fmt.Errorf("decode the answer: %w: %.200s", err, data)
		}
	}
	return resp, nil
}
