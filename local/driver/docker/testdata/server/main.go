// Command server is the workload of the docker runtime's tests: a static HTTP
// server that runs in a FROM scratch image.
//
// It listens on $PORT, answers GET / with its body, GET /info with what the
// container gave it (uid, working directory, argv, environment) and
// GET /exit?code=N by exiting with N; PUT /files/NAME stores the body as NAME
// in the working directory and GET /files/NAME returns it; GET /dial?addr=HOST:PORT
// answers 200 when a TCP connection to addr succeeds within two seconds. It prints one line to stdout and one to
// stderr when it starts, and exits 0 on SIGTERM unless -ignore-term is set.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	body := flag.String("body", "hello from the test server\n", "what GET / answers")
	ignoreTerm := flag.Bool("ignore-term", false, "ignore SIGTERM so that only a kill ends the server")
	flag.Parse()

	port := os.Getenv("PORT")
	if port == "" {
		fmt.Fprintln(os.Stderr, "server: PORT is not set")
		os.Exit(2)
	}
	ln, err := net.Listen("tcp", ":"+port)
	if err != nil {
		fmt.Fprintf(os.Stderr, "server: %v\n", err)
		os.Exit(1)
	}

	exit := make(chan int, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, *body)
	})
	mux.HandleFunc("GET /info", func(w http.ResponseWriter, _ *http.Request) {
		cwd, _ := os.Getwd()
		env := map[string]string{}
		for _, kv := range os.Environ() {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"uid":  os.Getuid(),
			"gid":  os.Getgid(),
			"cwd":  cwd,
			"args": os.Args,
			"env":  env,
		})
	})
	mux.HandleFunc("PUT /files/{name}", func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err == nil {
			err = os.WriteFile(r.PathValue("name"), b, 0o644)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
	mux.HandleFunc("GET /files/{name}", func(w http.ResponseWriter, r *http.Request) {
		b, err := os.ReadFile(r.PathValue("name"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		_, _ = w.Write(b)
	})
	mux.HandleFunc("GET /dial", func(w http.ResponseWriter, r *http.Request) {
		c, err := net.DialTimeout("tcp", r.URL.Query().Get("addr"), 2*time.Second)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		c.Close()
		fmt.Fprintln(w, "connected")
	})
	mux.HandleFunc("GET /exit", func(w http.ResponseWriter, r *http.Request) {
		code, err := strconv.Atoi(r.URL.Query().Get("code"))
		if err != nil {
			http.Error(w, "code must be an integer", http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "exiting with %d\n", code)
		exit <- code
	})

	// Signals are handled before the first request is served: a test that
	// stops the server once it answers expects it to exit 0.
	sigs := make(chan os.Signal, 1)
	if *ignoreTerm {
		signal.Ignore(syscall.SIGTERM)
	} else {
		signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	}

	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()

	fmt.Fprintf(os.Stdout, "server: listening on :%s\n", port)
	fmt.Fprintln(os.Stderr, "server: this line goes to stderr")
	select {
	case sig := <-sigs:
		fmt.Fprintf(os.Stdout, "server: got %v, exiting\n", sig)
		_ = srv.Shutdown(context.Background())
		os.Exit(0)
	case code := <-exit:
		// Let the response reach the client before the process ends.
		_ = srv.Shutdown(context.Background())
		os.Exit(code)
	}
}
