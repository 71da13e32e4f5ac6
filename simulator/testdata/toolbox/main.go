// Command toolbox is the workload the simulator's runtime tests spawn: the
// project's toolbox server on $PORT, as `sandplane toolbox` runs it, plus
// GET /_test/headers, which answers with the request's headers so that a
// test sees exactly what the simulator's proxy sent.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/sandplane/sandplane/toolbox"
)

func main() {
	if len(os.Args) == 3 && os.Args[1] == "fetch" {
		os.Exit(fetch(os.Args[2]))
	}
	if len(os.Args) == 2 && os.Args[1] == "rawsocket" {
		os.Exit(rawSocket())
	}
	port := os.Getenv("PORT")
	if port == "" {
		fmt.Fprintln(os.Stderr, "toolbox: PORT is not set")
		os.Exit(2)
	}
	wd, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(os.Stderr, "toolbox:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	// Loopback by default; the docker test's image sets TOOLBOX_HOST=0.0.0.0,
	// because the engine's port proxy cannot reach a container's loopback.
	host := os.Getenv("TOOLBOX_HOST")
	if host == "" {
		host = "127.0.0.1"
	}
	if err := serve(ctx, net.JoinHostPort(host, port), wd); err != nil {
		fmt.Fprintln(os.Stderr, "toolbox:", err)
		os.Exit(1)
	}
}

// fetch is `toolbox fetch URL`: GET URL within five seconds, print the
// status and the body, exit 0 on any HTTP answer and 1 when none came.
// The network tests run it inside sandboxes, where no other HTTP client
// is at hand.
func fetch(url string) int {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer resp.Body.Close()
	fmt.Printf("%d ", resp.StatusCode)
	_, _ = io.Copy(os.Stdout, resp.Body)
	return 0
}

// rawSocket is `toolbox rawsocket`: open a packet socket, which writes
// frames past the IP stack and its firewall rules; exit 0 if it opened,
// 1 with the error if it was refused.
func rawSocket() int {
	fd, err := syscall.Socket(syscall.AF_PACKET, syscall.SOCK_RAW, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "packet socket:", err)
		return 1
	}
	_ = syscall.Close(fd)
	fmt.Println("packet socket opened")
	return 0
}

func serve(ctx context.Context, addr, wd string) error {
	tb := toolbox.NewHandler(toolbox.Options{
		WorkDir:   wd,
		HomeAlias: os.Getenv(toolbox.HomeAliasEnv),
		Version:   "sim-test",
		SandboxID: os.Getenv("DAYTONA_SANDBOX_ID"),
		// The simulator's backend hands every workload its secret, and its
		// toolbox proxy sends it: the test toolbox checks it as the real one.
		Token: os.Getenv("SANDPLANE_SANDBOX_TOKEN"),
		// As `sandplane toolbox` does: the backend names each sandbox's
		// entrypoint there, and its commands do not inherit it.
		Entrypoint: takeEnv(toolbox.EntrypointEnv),
	})
	if c, ok := tb.(io.Closer); ok {
		defer c.Close()
	}
	mux := http.NewServeMux()
	mux.Handle("/", tb)
	mux.HandleFunc("GET /_test/headers", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"host": r.Host, "header": r.Header})
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 30 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// A test workload: its requests are cut off at once on SIGTERM.
	_ = srv.Close()
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// takeEnv returns $name and takes it out of the environment.
func takeEnv(name string) string {
	v := os.Getenv(name)
	_ = os.Unsetenv(name)
	return v
}
