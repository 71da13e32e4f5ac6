package toolbox

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/sandplane/sandplane/toolbox/wire"
)

// sdkVersionHeader carries the version of the SDK that sends a request.
const sdkVersionHeader = "X-Daytona-SDK-Version"

// The first SDK versions that read logs as JSON with stdout and stderr
// apart; older ones read the interleaved output as plain text.
var (
	jsonCommandLogsSince    = [3]int{0, 167, 0}
	jsonEntrypointLogsSince = [3]int{0, 161, 0}
)

func (s *server) handleCreateSession(w http.ResponseWriter, r *http.Request) {
	var req wire.CreateSessionRequest
	if err := readJSON(w, r, defaultMaxJSONBodyBytes, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.sessions.create(req.SessionID); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusCreated)
}

func (s *server) handleListSessions(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.sessions.list())
}

func (s *server) handleGetSession(w http.ResponseWriter, r *http.Request) {
	sess, err := s.sessions.get(r.PathValue("sessionId"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, sess.view())
}

func (s *server) handleDeleteSession(w http.ResponseWriter, r *http.Request) {
	if err := s.sessions.remove(r.PathValue("sessionId")); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func parseSessionExecuteRequest(body []byte) (wire.SessionExecuteRequest, error) {
	var req wire.SessionExecuteRequest
	if err := decodeJSON(body, &req); err != nil {
		return req, err
	}
	return req, validCommand(req.Command)
}

func (s *server) handleSessionExec(w http.ResponseWriter, r *http.Request) {
	sess, err := s.sessions.get(r.PathValue("sessionId"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	body, err := readBody(w, r, defaultMaxJSONBodyBytes)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	req, err := parseSessionExecuteRequest(body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	async := req.RunAsync || req.Async
	c, err := sess.exec(req.Command, execOptions{async: async, suppressEcho: req.SuppressInputEcho})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if async {
		writeJSON(w, http.StatusAccepted, wire.SessionExecuteResponse{CmdID: c.id})
		return
	}
	select {
	case <-c.done:
	case <-r.Context().Done():
		// The command keeps running in the session; its logs stay readable.
		return
	}
	logs := sess.logs(c)
	sess.mu.Lock()
	code := *c.exit
	sess.mu.Unlock()
	// Streamed, as SessionExecuteResponse.
	fields := append([]field{{"cmdId", c.id}}, logs.fields()...)
	writeJSONStream(w, http.StatusOK, append(fields, field{"exitCode", code})...)
}

func (s *server) sessionCommand(r *http.Request) (*session, *sessionCommand, error) {
	sess, err := s.sessions.get(r.PathValue("sessionId"))
	if err != nil {
		return nil, nil, err
	}
	c, err := sess.command(r.PathValue("commandId"))
	if err != nil {
		return nil, nil, err
	}
	return sess, c, nil
}

func (s *server) handleGetCommand(w http.ResponseWriter, r *http.Request) {
	sess, c, err := s.sessionCommand(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	sess.mu.Lock()
	v := wire.SessionCommand{ID: c.id, Command: c.text, ExitCode: c.exit}
	sess.mu.Unlock()
	writeJSON(w, http.StatusOK, v)
}

func (s *server) handleCommandLogs(w http.ResponseWriter, r *http.Request) {
	sess, c, err := s.sessionCommand(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.answerLogs(w, r, sess, c, jsonCommandLogsSince)
}

func (s *server) handleSendInput(w http.ResponseWriter, r *http.Request) {
	sess, c, err := s.sessionCommand(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var req wire.SessionSendInputRequest
	if err := readJSON(w, r, defaultMaxJSONBodyBytes, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if req.Data == nil {
		s.fail(w, r, errorf(http.StatusBadRequest, "data is required"))
		return
	}
	if err := sess.sendInput(r.Context(), c, *req.Data); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *server) handleEntrypointSession(w http.ResponseWriter, r *http.Request) {
	sess, _, err := s.sessions.entrypoint()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, sess.view())
}

func (s *server) handleEntrypointLogs(w http.ResponseWriter, r *http.Request) {
	sess, c, err := s.sessions.entrypoint()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.answerLogs(w, r, sess, c, jsonEntrypointLogsSince)
}

// answerLogs answers a logs request: a WebSocket that follows the command
// with ?follow=true, else its logs so far, as JSON, or as plain text to an
// SDK older than jsonSince.
func (s *server) answerLogs(w http.ResponseWriter, r *http.Request, sess *session, c *sessionCommand, jsonSince [3]int) {
	follow, err := boolQuery(r, "follow")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if follow {
		if !isWebSocket(r) {
			s.fail(w, r, errorf(http.StatusBadRequest, "follow=true streams over a WebSocket: connect with a WebSocket client, or leave follow out to read the logs so far"))
			return
		}
		s.followLogs(w, r, sess, c)
		return
	}
	logs := sess.logs(c)
	if olderSDK(r.Header.Get(sdkVersionHeader), jsonSince) {
		writeTextStream(w, http.StatusOK, logs.output)
		return
	}
	// Streamed, as SessionCommandLogs.
	writeJSONStream(w, http.StatusOK, logs.fields()...)
}

// boolQuery reads an optional boolean query parameter; absent is false.
func boolQuery(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, errorf(http.StatusBadRequest, "%s must be true or false, not %q", name, v)
	}
	return b, nil
}

// olderSDK reports whether version (as the SDKs send it, "0.190.0" or
// "v0.190.0-rc1") is older than since. An absent or unreadable version is
// a current SDK.
func olderSDK(version string, since [3]int) bool {
	version = strings.TrimPrefix(strings.TrimSpace(version), "v")
	if i := strings.IndexAny(version, "-+"); i >= 0 {
		version = version[:i]
	}
	parts := strings.Split(version, ".")
	if len(parts) != 3 {
		return false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return false
		}
		if n != since[i] {
			return n < since[i]
		}
	}
	return false
}

// writeTextStream answers pieces as text/plain without joining them.
func writeTextStream(w http.ResponseWriter, status int, pieces text) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	for _, p := range pieces {
		if _, err := w.Write(p); err != nil {
			return
		}
	}
}
