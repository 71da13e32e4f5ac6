package daytona

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	apiclient "github.com/daytonaio/daytona/libs/api-client-go"

	"github.com/sandplane/sandplane/provider"
)

// op names the Provider operation a request belongs to; classify uses it
// where Daytona's status alone is ambiguous.
type op string

const (
	opInfo     op = "info"
	opCreate   op = "create"
	opGet      op = "get"
	opList     op = "list"
	opStart    op = "start"
	opStop     op = "stop"
	opDelete   op = "delete"
	opRefresh  op = "refresh activity"
	opAutoStop op = "set auto-stop interval"
	opResize   op = "resize"
	opPreview  op = "preview URL"
	opToolbox  op = "toolbox"
	opLogs     op = "entrypoint logs"
	opTTL      op = "set TTL"
	opPause    op = "set auto-pause interval"
	opSecrets  op = "set secrets"
	opWarmPool op = "warm pool"
	opPoolNew  op = "create warm pool"
)

// setsInterval reports the ops that set one of a sandbox's intervals.
func (o op) setsInterval() bool {
	return o == opAutoStop || o == opPause || o == opAutoDelete
}

// errTimedOut is the cause of a context ended by one of the provider's own
// deadlines, as opposed to the caller's.
var errTimedOut = errors.New("timed out")

// classify turns whatever the api-client returned for op into a coded error:
// Daytona's status and message, or what went wrong on the way there. It is
// the one place where Daytona's errors are interpreted, so every outcome
// is also evidence about the API key. nil stays nil.
func (p *Provider) classify(ctx context.Context, op op, resp *http.Response, err error) error {
	out := p.classifyErr(ctx, op, resp, err)
	p.creds.Result(p.keyID, out, "Daytona at "+p.cfg.APIURL+" answered")
	return out
}

// classifyErr maps one call's failure (nil for none).
func (p *Provider) classifyErr(ctx context.Context, op op, resp *http.Response, err error) error {
	if err == nil {
		return nil
	}
	if resp != nil && isHTML(resp) {
		// Daytona serves its dashboard outside /api.
		return provider.Errorf(provider.InvalidArgument,
			"%s answered with a web page, not the API: %s must end in /api (like %s)", p.cfg.APIURL, EnvAPIURL, DefaultAPIURL)
	}
	if resp != nil && resp.StatusCode >= 300 {
		msg := serverMessage(resp, err)
		code := provider.CodeForHTTPStatus(resp.StatusCode)
		switch {
		case resp.StatusCode == http.StatusNotFound && strings.HasPrefix(msg, "Cannot "):
			// NestJS's answer for a route it does not serve.
			code = provider.Unsupported
			msg = fmt.Sprintf("%s is not enabled on this Daytona server (%s)", op, msg)
		case resp.StatusCode == http.StatusNotFound && op == opLogs:
			// The sandbox was found first: its toolbox is older than the
			// entrypoint session.
			code = provider.Unsupported
			msg = fmt.Sprintf("this sandbox's toolbox serves no entrypoint session (%s): it predates Daytona's entrypoint logs; recreate the sandbox on a current snapshot", msg)
		case resp.StatusCode == http.StatusNotFound && strings.HasPrefix(msg, "Secret ") && op == opCreate:
			// A secret the organization lacks, found before anything ran.
			code = provider.PreflightFailed
		case resp.StatusCode == http.StatusNotFound && strings.HasPrefix(msg, "Secret ") && op == opSecrets:
			// Not the sandbox: the set names a secret nobody made.
			code = provider.InvalidArgument
		case resp.StatusCode == http.StatusBadRequest && op.setsInterval() &&
			(strings.Contains(msg, "autoStopInterval and autoPauseInterval") || strings.HasPrefix(msg, "Ephemeral ")):
			// The interval is fine; the sandbox's other intervals refuse it
			// (at most one of auto-stop and auto-pause, none on an
			// ephemeral sandbox).
			code = provider.FailedPrecondition
		case resp.StatusCode == http.StatusConflict && (op == opCreate || op == opPoolNew):
			code = provider.AlreadyExists
		case resp.StatusCode == http.StatusForbidden && op == opWarmPool && strings.HasPrefix(msg, "Warm pool "):
			// A pool the server keeps for every organization, which none
			// may change: the key is fine (a refused key is "Forbidden
			// resource"), so this must not count against it.
			code = provider.FailedPrecondition
		case resp.StatusCode < 500 && (op == opPoolNew || op == opWarmPool) && strings.Contains(msg, "quota"):
			// A size beyond what the organization may keep warm.
			code = provider.ResourceExhausted
		case resp.StatusCode == http.StatusBadRequest && strings.HasPrefix(msg, "Sandbox failed to start"):
			code = provider.CreateFailed
		case resp.StatusCode == http.StatusBadRequest && op == opCreate && strings.HasPrefix(msg, "Snapshot "),
			resp.StatusCode < 500 && op == opPoolNew && strings.HasPrefix(msg, "Snapshot "):
			code = provider.PreflightFailed
		case resp.StatusCode == http.StatusBadRequest && (op == opStart || op == opStop):
			// Start and stop have no body to be invalid: their 400s refuse
			// the sandbox's state.
			code = provider.FailedPrecondition
		case resp.StatusCode == http.StatusUnauthorized:
			msg = fmt.Sprintf("Daytona refused the API key (%s): check %s, or make a new key at %s", msg, EnvAPIKey, keysURL)
		case resp.StatusCode == http.StatusTooManyRequests:
			msg = rateLimitMessage(resp, p.clk, p.retries, msg)
		}
		return &provider.Error{Code: code, Message: msg, Err: err}
	}
	if cause := context.Cause(ctx); cause != nil && ctx.Err() != nil {
		switch {
		case errors.Is(cause, errTimedOut):
			return provider.Errorf(provider.DeadlineExceeded, "%s: Daytona at %s did not answer in time: %w", op, p.cfg.APIURL, err)
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			return provider.Errorf(provider.DeadlineExceeded, "%s: the caller's deadline passed before Daytona at %s answered: %w", op, p.cfg.APIURL, err)
		}
		return provider.Errorf(provider.Canceled, "%s: request to Daytona was cancelled: %w", op, err)
	}
	var oe *net.OpError
	var dns *net.DNSError
	var ue *url.Error
	var gen *apiclient.GenericOpenAPIError
	switch {
	case errors.As(err, &dns):
		return provider.Errorf(provider.Unavailable, "%s: cannot resolve %s: check %s (%v)", op, dns.Name, EnvAPIURL, err)
	case errors.As(err, &oe) && oe.Op == "dial":
		return provider.Errorf(provider.Unavailable, "%s: nothing answers at %s: check %s and your network (%v)", op, p.cfg.APIURL, EnvAPIURL, err)
	case errors.As(err, &oe), errors.As(err, &ue):
		return provider.Errorf(provider.Unavailable, "%s: the connection to Daytona at %s failed: %w", op, p.cfg.APIURL, err)
	case errors.As(err, &gen):
		// A 2xx whose body the client could not decode.
		return provider.Errorf(provider.Internal, "%s: unexpected answer from Daytona at %s: %v: %.200s", op, p.cfg.APIURL, err, gen.Body())
	}
	return provider.Errorf(provider.Internal, "%s: %w", op, err)
}

// serverMessage is the message of a NestJS error body, or the status line.
func serverMessage(resp *http.Response, err error) string {
	// The api-client's GenericOpenAPIError, or a raw call's apiError.
	var gen interface{ Body() []byte }
	if errors.As(err, &gen) {
		var body struct {
			Message json.RawMessage `json:"message"`
		}
		if json.Unmarshal(gen.Body(), &body) == nil && len(body.Message) > 0 {
			var s string
			if json.Unmarshal(body.Message, &s) == nil && s != "" {
				return s
			}
			var list []string
			if json.Unmarshal(body.Message, &list) == nil && len(list) > 0 {
				return strings.Join(list, ", ")
			}
		}
	}
	return fmt.Sprintf("HTTP %s", resp.Status)
}

func isHTML(resp *http.Response) bool {
	return strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html")
}
