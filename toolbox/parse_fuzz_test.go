package toolbox

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"
)

// The parsers below read what a client, a flag or a repository's content
// decides: each must refuse with a 400 (or skip) what it cannot read,
// never panic, and keep the promises its callers rely on.

func FuzzParseGitURLRewrite(f *testing.F) {
	for _, s := range []string{"https://github.com/=file:///srv/fixtures/", "a=b=c", "=x", "x=", "=", "", "no-equals"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		rw, err := ParseGitURLRewrite(s)
		from, to, ok := strings.Cut(s, "=")
		if wantOK := ok && from != "" && to != ""; (err == nil) != wantOK {
			t.Fatalf("ParseGitURLRewrite(%q) error %v, want ok=%v", s, err, wantOK)
		}
		if err != nil {
			if rw != (GitURLRewrite{}) {
				t.Fatalf("a refused rewrite came with %+v", rw)
			}
			return
		}
		// Split at the first '=': From never holds one, To may.
		if rw.From+"="+rw.To != s || strings.Contains(rw.From, "=") {
			t.Fatalf("ParseGitURLRewrite(%q) = %+v", s, rw)
		}
	})
}

func FuzzParseGitStatus(f *testing.F) {
	for _, s := range []string{
		"# branch.oid abc\x00# branch.head main\x00# branch.upstream origin/main\x00# branch.ab +1 -2\x00",
		"1 .M N... 100644 100644 100644 abc abc a.txt\x00? new.txt\x00",
		"2 R. N... 100644 100644 100644 abc abc R100 new.txt\x00old.txt\x00",
		"u UU N... 100644 100644 100644 100644 a b c both.txt\x00",
		"# branch.head (detached)\x00",
		"1  a b c d e f name\x00",
		"2 R. N... 100644 100644 100644 abc abc R100 last.txt",
	} {
		f.Add(s)
	}
	known := map[string]bool{"Unmodified": true}
	for _, v := range gitStatusCodes {
		known[v] = true
	}
	f.Fuzz(func(t *testing.T, out string) {
		st := parseGitStatus(out)
		if n := strings.Count(out, "\x00") + 1; len(st.FileStatus) > n {
			t.Fatalf("%d files from %d records", len(st.FileStatus), n)
		}
		for _, fs := range st.FileStatus {
			if !known[fs.Staging] || !known[fs.Worktree] {
				t.Fatalf("status %+v is not of Daytona's enum", fs)
			}
		}
	})
}

func FuzzParseGitLog(f *testing.F) {
	for _, s := range []string{
		"abc\x1fAda\x1fada@example.com\x1f2026-01-01T00:00:00Z\x1fsubject\n\nbody\n\x1e\n",
		"abc\x1fA\x1fa@b\x1ft\x1fone\x1e\ndef\x1fB\x1fb@c\x1ft\x1ftwo\x1e",
		"a\x1fb\x1fc\x1fd",
		"\x1e\x1e",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, out string) {
		commits := parseGitLog(out)
		if n := strings.Count(out, "\x1e") + 1; len(commits) > n {
			t.Fatalf("%d commits from %d records", len(commits), n)
		}
		for _, c := range commits {
			for _, v := range []string{c.Hash, c.Author, c.Email, c.Timestamp, c.Message} {
				if strings.ContainsAny(v, "\x1e\x1f") {
					t.Fatalf("a separator in %+v", c)
				}
			}
			if strings.HasSuffix(c.Message, "\n") {
				t.Fatalf("message %q keeps its trailing newline", c.Message)
			}
		}
	})
}

func FuzzParseCodeRunRequest(f *testing.F) {
	for _, s := range []string{
		`{"code":"print(1)","language":"python"}`,
		`{"code":"console.log(1)","language":"JavaScript","argv":["a"],"envs":{"A":"1"},"timeout":5}`,
		`{"code":"x","language":"python","argv":["a\u0000b"]}`,
		`{"code":"x","language":"python","timeout":-1}`,
		`{"code":"x","language":"cobol"}`,
		`{"code":" ","language":"python"}`,
		`{"code":"x","language":"python","envs":{"=":"x"}}`,
		`[]`, `x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, runner, err := parseCodeRunRequest(body)
		if err != nil {
			if asAPIError(err).status != http.StatusBadRequest {
				t.Fatalf("non-400 for a bad body: %v", err)
			}
			return
		}
		if strings.TrimSpace(req.Code) == "" || runner.file == "" {
			t.Fatalf("accepted %+v with runner %+v", req, runner)
		}
		for _, a := range req.Argv {
			if strings.IndexByte(a, 0) >= 0 {
				t.Fatalf("accepted a NUL in argv %q", req.Argv)
			}
		}
		if req.Timeout != nil && *req.Timeout < 0 {
			t.Fatalf("accepted timeout %d", *req.Timeout)
		}
	})
}

func FuzzParsePermissions(f *testing.F) {
	for _, s := range [][3]string{{"0755", "", ""}, {"4755", "0", "0"}, {"17777", "", ""}, {"8", "", ""}, {"", "root", "root"}, {"-1", "", ""}, {"", "no-such-user-xyz", ""}} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, mode, owner, group string) {
		p, err := parsePermissions(mode, owner, group)
		if err != nil {
			if asAPIError(err).status != http.StatusBadRequest {
				t.Fatalf("non-400 for mode %q owner %q group %q: %v", mode, owner, group, err)
			}
			return
		}
		if (p.mode != nil) != (mode != "") {
			t.Fatalf("mode %q gave %v", mode, p.mode)
		}
		if p.mode != nil && *p.mode&^(0o777|os.ModeSetuid|os.ModeSetgid|os.ModeSticky) != 0 {
			t.Fatalf("mode %q gave bits beyond a chmod's: %v", mode, *p.mode)
		}
		if (owner == "") != (p.uid == -1) || (group == "") != (p.gid == -1) {
			t.Fatalf("owner %q group %q gave uid %d gid %d", owner, group, p.uid, p.gid)
		}
	})
}

func FuzzValidSessionID(f *testing.F) {
	for _, s := range []string{"s1", "entrypoint", "", " ", "a/b", `a\b`, "a\x00b", "ü", strings.Repeat("x", maxSessionIDBytes+1)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		err := validSessionID(id)
		if err != nil {
			if asAPIError(err).status != http.StatusBadRequest {
				t.Fatalf("non-400 for %q: %v", id, err)
			}
			return
		}
		// An id names a path segment and a log line: never blank, long,
		// a separator or unprintable.
		if strings.TrimSpace(id) == "" || len(id) > maxSessionIDBytes || strings.ContainsAny(id, `/\`) {
			t.Fatalf("accepted %q", id)
		}
		for _, r := range id {
			if !unicode.IsPrint(r) {
				t.Fatalf("accepted %q with %U", id, r)
			}
		}
	})
}

// FuzzBulkUpload sends a bulk upload of two files and one part of any
// name to a toolbox confined to a directory: whatever the paths, it
// answers 200, 400 or 413 with JSON, and writes nothing outside the root.
func FuzzBulkUpload(f *testing.F) {
	f.Add("a.txt", "one", "dir/b.txt", "two", "files[2].path", "c.txt")
	f.Add("../escape.txt", "x", "/etc/passwd", "y", "files[9].file", "z")
	f.Add("", "orphan", "   ", "blank", "files[1].path", "")
	f.Add("same.txt", "first", "same.txt", "second", "other", "ignored")
	f.Add("dir", "x", "dir/x", "y", "files[0].path", "dir/x/z")
	parent := f.TempDir()
	root := filepath.Join(parent, "root")
	require.NoError(f, os.Mkdir(root, 0o755))
	s, err := newServer(Options{Token: testToken, WorkDir: root, HomeDir: root, Root: root, MaxUploadBytes: 1 << 16})
	require.NoError(f, err)
	f.Cleanup(func() { s.Close() })
	f.Fuzz(func(t *testing.T, p0, f0, p1, f1, name, value string) {
		body, ctype := multipartBody(t, "files[0].path", p0, "files[0].file", f0, "files[1].path", p1, "files[1].file", f1, name, value)
		req := httptest.NewRequest(http.MethodPost, "/files/bulk-upload", body)
		req.Host = "127.0.0.1"
		req.Header.Set("Content-Type", ctype)
		req.Header.Set(TokenHeader, testToken)
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusOK, http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("not JSON: %q", rec.Body)
		}
		err := filepath.WalkDir(parent, func(p string, d fs.DirEntry, err error) error {
			if err != nil || p == parent || p == root || strings.HasPrefix(p, root+string(filepath.Separator)) {
				return err
			}
			return fmt.Errorf("%s was written outside the root", p)
		})
		require.NoError(t, err)
	})
}

// FuzzParseInterpRequest decodes the first message of an interpreter
// WebSocket, which any client writes.
func FuzzParseInterpRequest(f *testing.F) {
	for _, s := range []string{
		`{"code":"print(1)"}`,
		`{"code":"x","contextId":"c","envs":{"A":"1"},"timeout":3}`,
		`{"code":"x","timeout":-1}`,
		`{"code":""}`,
		`{"code":"x","envs":{"A=B":"1"}}`,
		`null`, `x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := parseInterpRequest(b)
		if err != nil {
			return
		}
		if req.Code == "" || req.Timeout != nil && *req.Timeout < 0 || validateEnv(req.Envs) != nil {
			t.Fatalf("accepted %+v", req)
		}
	})
}

// FuzzParseCompletions and FuzzParseSymbols read a language server's
// answers, which follow the project's files: whatever shape comes, the
// toolbox answers JSON or a 500, never panics.
func FuzzParseCompletions(f *testing.F) {
	for _, s := range []string{
		`{"isIncomplete":true,"items":[{"label":"print","kind":3,"documentation":"doc"}]}`,
		`[{"label":"a","documentation":{"kind":"markdown","value":"**x**"}}]`,
		`[{"label":"a","documentation":""}]`,
		`[{"label":"a","documentation":7}]`,
		`null`, ``, `[`, `{"items":{}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		list, err := parseCompletions(json.RawMessage(raw))
		if err != nil {
			if asAPIError(err).status != http.StatusInternalServerError {
				t.Fatalf("a bad answer is not a 500: %v", err)
			}
			return
		}
		if list.Items == nil {
			t.Fatal("items is null, not a list")
		}
		if _, err := json.Marshal(list); err != nil {
			t.Fatalf("the answer does not encode: %v", err)
		}
	})
}

func FuzzParseSymbols(f *testing.F) {
	for _, s := range []string{
		`[{"name":"f","kind":12,"location":{"uri":"file:///a.py","range":{"start":{"line":1,"character":0},"end":{"line":2,"character":0}}}}]`,
		`[{"name":"C","kind":5,"range":{"start":{"line":0,"character":0},"end":{"line":9,"character":0}},"children":[{"name":"m","kind":6,"children":[]}]}]`,
		`[{"name":"x","location":{"uri":"file:///b.py"}}]`,
		`null`, ``, `{}`, `[null]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		const doc = "file:///doc.py"
		syms, err := parseSymbols(json.RawMessage(raw), doc)
		if err != nil {
			if asAPIError(err).status != http.StatusInternalServerError {
				t.Fatalf("a bad answer is not a 500: %v", err)
			}
			return
		}
		if syms == nil {
			t.Fatal("symbols is null, not a list")
		}
		if _, err := json.Marshal(syms); err != nil {
			t.Fatalf("the answer does not encode: %v", err)
		}
	})
}
