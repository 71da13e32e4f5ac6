package conformance_test

import (
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sandplane/sandplane/conformance/cassette"
)

// recordedLiterals are the secrets a recording run sends: the simulator's
// API key, the replay's, the env value exec_through_toolbox sets (a copy
// of the constant in scenarios.go) and the value of the secret the
// simulator's harness makes.
var recordedLiterals = []string{simKey, replayKey, "conformance-value-1234", simSecret.Value}

var (
	// simTokenRE is the shape of the simulator's tokens, whose alphabets
	// are lower-case letters, digits, '_' and '-': preview tokens of 32,
	// signed preview tokens of 16, SSH tokens of 32, taken as a whole word.
	simTokenRE = regexp.MustCompile(`(?:^|[^A-Za-z0-9_-])([a-z0-9_-]{16}|[a-z0-9_-]{32})(?:$|[^A-Za-z0-9_-])`)
	// liveRunRE is a run id of a live run (see runID), which a recording
	// replaces by cassette.RunID.
	liveRunRE = regexp.MustCompile(`\br[ghjkmnpqrstvwxyz]{8}\b`)
	// absHomeRE is an absolute path under a home directory other than the
	// simulated sandbox's own.
	absHomeRE = regexp.MustCompile(`/(?:home/[^/"\\\s]+|root|Users/[^/"\\\s]+)/`)
)

// TestCassettesHoldNoToken walks every committed cassette and shows that
// none holds a credential: each loads (Decode refuses a frame with a
// credential of any shape the normalizer knows: an Authorization
// credential, a credential JSON key, a signed URL's parameters, a preview
// link's token, an SSH user, a credential variable's assignment), and no
// frame has any of the literal secrets a recording run used, a token of
// the simulator's shapes, a live run id or a path under this or another
// machine's home.
func TestCassettesHoldNoToken(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "*", "*.replay"))
	require.NoError(t, err)
	require.NotEmpty(t, paths, "no committed cassettes")
	home, _ := os.UserHomeDir()
	for _, path := range paths {
		t.Run(filepath.Base(filepath.Dir(path))+"/"+strings.TrimSuffix(filepath.Base(path), ".replay"), func(t *testing.T) {
			_, frames, err := cassette.Load(path)
			require.NoError(t, err, "a cassette that holds a credential does not load")
			for _, f := range frames {
				assert.Empty(t, cassette.Leaks(f, recordedLiterals...), "frame %d", f.Seq)
				for _, fld := range frameTexts(f) {
					assertNoSimToken(t, f.Seq, fld[0], fld[1])
					assert.NotRegexp(t, liveRunRE, fld[1], "frame %d %s: a live run id", f.Seq, fld[0])
					assert.NotRegexp(t, absHomeRE, strings.ReplaceAll(fld[1], "/home/daytona/", ""), "frame %d %s: a path under a home", f.Seq, fld[0])
					if home != "" && home != "/" {
						assert.NotContains(t, fld[1], home+"/", "frame %d %s: a path under this machine's home", f.Seq, fld[0])
					}
				}
			}
		})
	}
}

// assertNoSimToken fails t for a word of the simulator's token shapes in
// s that mixes letters and digits and is no placeholder.
func assertNoSimToken(t *testing.T, seq int, field, s string) {
	t.Helper()
	if u, err := url.QueryUnescape(s); err == nil {
		s = u // a query's %22 is no part of a word
	}
	for _, m := range simTokenRE.FindAllStringSubmatch(s, -1) {
		w := m[1]
		if cassette.IsPlaceholder(w) || !strings.ContainsAny(w, "0123456789") || !strings.ContainsAny(w, "abcdefghijklmnopqrstuvwxyz") {
			continue
		}
		t.Errorf("frame %d %s: %q has the shape of a simulator token", seq, field, w)
	}
}

// frameTexts is every text of f, named.
func frameTexts(f cassette.Frame) [][2]string {
	out := [][2]string{{"request.url", f.Request.URL}, {"request.body", f.Request.Body}}
	for k, v := range f.Request.Header {
		out = append(out, [2]string{"request.header." + k, v})
	}
	if f.Response != nil {
		out = append(out, [2]string{"response.body", f.Response.Body})
		for k, v := range f.Response.Header {
			out = append(out, [2]string{"response.header." + k, v})
		}
	}
	if f.Error != nil {
		out = append(out, [2]string{"error.message", f.Error.Message})
	}
	return out
}
