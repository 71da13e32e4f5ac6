package baseimage

import (
	"bufio"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// aptSource is one entry of the host's apt sources, in either format.
type aptSource struct {
	Types, URIs, Suites, Components []string
	Enabled                         bool
}

// HostSuite is the codename of the Debian release described by the
// os-release file at path, or DefaultSuite when it is not Debian or names
// none (sid): a host of another distribution builds Debian's stable.
func HostSuite(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return DefaultSuite
	}
	defer f.Close()
	vars := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if ok {
			vars[k] = strings.Trim(v, `"'`)
		}
	}
	if vars["ID"] != "debian" || !validSuite.MatchString(vars["VERSION_CODENAME"]) {
		return DefaultSuite
	}
	return vars["VERSION_CODENAME"]
}

// HostMirror is the Debian archive the host's apt uses for suite, read from
// sources.list and sources.list.d/*.list (one-line format) and
// sources.list.d/*.sources (deb822) under dir, in the order apt reads them:
// the first enabled deb entry of suite itself (not suite-updates or
// suite-security) with the main component and an http, https or file URI.
// DefaultMirror when there is none.
func HostMirror(dir, suite string) string {
	files := []string{filepath.Join(dir, "sources.list")}
	parts, _ := filepath.Glob(filepath.Join(dir, "sources.list.d", "*"))
	sort.Strings(parts)
	files = append(files, parts...)
	for _, name := range files {
		var parse func(io.Reader) []aptSource
		switch {
		case strings.HasSuffix(name, ".list"):
			parse = parseOneLine
		case strings.HasSuffix(name, ".sources"):
			parse = parseDeb822
		default:
			continue // apt ignores other names too (.save, .disabled, ...)
		}
		f, err := os.Open(name)
		if err != nil {
			continue
		}
		sources := parse(f)
		f.Close()
		if m, ok := pickMirror(sources, suite); ok {
			return m
		}
	}
	return DefaultMirror
}

// pickMirror is the URI of the first source that HostMirror accepts.
func pickMirror(sources []aptSource, suite string) (string, bool) {
	for _, s := range sources {
		if !s.Enabled || !slices.Contains(s.Types, "deb") || !slices.Contains(s.Suites, suite) || !slices.Contains(s.Components, "main") {
			continue
		}
		for _, uri := range s.URIs {
			u, err := url.Parse(uri)
			if err == nil && (u.Scheme == "http" || u.Scheme == "https" || u.Scheme == "file") {
				return strings.TrimSuffix(uri, "/"), true
			}
		}
	}
	return "", false
}

// parseOneLine reads sources.list's format:
//
//	deb [arch=amd64 signed-by=/k.gpg] http://deb.debian.org/debian bookworm main contrib
//
// Lines it cannot read are skipped, as apt would refuse them.
func parseOneLine(r io.Reader) []aptSource {
	var out []aptSource
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		typ := fields[0]
		fields = fields[1:]
		if len(fields) > 0 && strings.HasPrefix(fields[0], "[") {
			// Options run to the first field that ends the bracket.
			end := slices.IndexFunc(fields, func(f string) bool { return strings.HasSuffix(f, "]") })
			if end < 0 {
				continue
			}
			fields = fields[end+1:]
		}
		if len(fields) < 2 {
			continue
		}
		out = append(out, aptSource{
			Types: []string{typ}, URIs: fields[:1], Suites: fields[1:2], Components: fields[2:],
			Enabled: true,
		})
	}
	return out
}

// parseDeb822 reads the .sources format: stanzas of "Field: value" lines
// separated by blank lines, values continued on indented lines, # comments.
func parseDeb822(r io.Reader) []aptSource {
	var out []aptSource
	fields := map[string]string{}
	last := ""
	flush := func() {
		if len(fields) > 0 {
			out = append(out, aptSource{
				Types:      strings.Fields(fields["types"]),
				URIs:       strings.Fields(fields["uris"]),
				Suites:     strings.Fields(fields["suites"]),
				Components: strings.Fields(fields["components"]),
				Enabled:    !strings.EqualFold(strings.TrimSpace(fields["enabled"]), "no"),
			})
		}
		fields, last = map[string]string{}, ""
	}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.TrimSpace(line) == "":
			flush()
		case strings.HasPrefix(line, "#"):
		case line[0] == ' ' || line[0] == '\t':
			if last != "" {
				fields[last] += " " + strings.TrimSpace(line)
			}
		default:
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			last = strings.ToLower(strings.TrimSpace(k))
			fields[last] = strings.TrimSpace(v)
		}
	}
	flush()
	return out
}
