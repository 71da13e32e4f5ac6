// Command gen copies the upstream OpenAPI documents and their license out of
// the Go modules pinned in go.mod into the specs package, for go:embed. It
// runs from `go generate` in the specs directory and needs the modules in
// the module cache (`go mod download` fetches them).
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// copies maps a module to the files taken from it: source path inside the
// module to destination name in the specs directory.
var copies = []struct {
	module string
	files  map[string]string
}{
	{"github.com/daytonaio/daytona/libs/api-client-go", map[string]string{
		"api/openapi.yaml": "daytona-api.yaml",
		"LICENSE":          "LICENSE",
	}},
	{"github.com/daytonaio/daytona/libs/toolbox-api-client-go", map[string]string{
		"api/openapi.yaml": "daytona-toolbox-api.yaml",
	}},
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "specs/gen:", err)
		os.Exit(1)
	}
}

func run() error {
	version := ""
	for _, c := range copies {
		dir, v, err := moduleDir(c.module)
		if err != nil {
			return err
		}
		if version != "" && v != version {
			return fmt.Errorf("%s is at %s, the other documents at %s: pin both clients to one release", c.module, v, version)
		}
		version = v
		for src, dst := range c.files {
			b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(src)))
			if err != nil {
				return fmt.Errorf("read %s of %s@%s: %w", src, c.module, v, err)
			}
			if err := writeIfChanged(dst, b); err != nil {
				return err
			}
		}
	}
	return writeIfChanged("VERSION", []byte(version+"\n"))
}

// moduleDir asks the go command where the module of the main module's
// build list lives, downloading it when needed.
func moduleDir(module string) (dir, version string, err error) {
	out, err := exec.Command("go", "mod", "download", "-json", module).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			err = fmt.Errorf("%w: %s", err, bytes.TrimSpace(ee.Stderr))
		}
		return "", "", fmt.Errorf("locate %s: %w", module, err)
	}
	var m struct{ Dir, Version, Error string }
	if err := json.Unmarshal(out, &m); err != nil {
		return "", "", fmt.Errorf("locate %s: %w", module, err)
	}
	if m.Error != "" || m.Dir == "" {
		return "", "", fmt.Errorf("locate %s: %s", module, m.Error)
	}
	return m.Dir, m.Version, nil
}

func writeIfChanged(name string, b []byte) error {
	if old, err := os.ReadFile(name); err == nil && bytes.Equal(old, b) {
		return nil
	}
	return os.WriteFile(name, b, 0o644)
}
