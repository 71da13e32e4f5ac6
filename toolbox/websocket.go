package toolbox

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/coder/websocket"
)

// maxWebSocketMessage bounds one message a client sends (PTY input, an
// interpreter request).
const maxWebSocketMessage = 16 << 20

// isWebSocket reports whether r asks for a WebSocket upgrade.
func isWebSocket(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// offeredProtocols lists the subprotocols the client offered, in order.
func offeredProtocols(r *http.Request) []string {
	var out []string
	for _, h := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(h, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// acceptWebSocket upgrades r. Of the subprotocols the client offers it
// selects the first of prefer, else the first offered: browsers drop a
// connection whose offer is not answered, and the SDKs offer tokens (their
// version, PTY capabilities) rather than real protocols.
//
// The Origin is not checked here: the toolbox's access control checks Host
// and Origin for every route, upgrades included.
func acceptWebSocket(w http.ResponseWriter, r *http.Request, prefer ...string) (*websocket.Conn, error) {
	offered := offeredProtocols(r)
	protos := append([]string{}, prefer...)
	protos = append(protos, offered...)
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		Subprotocols:       protos,
		InsecureSkipVerify: true,
	})
	if err != nil {
		return nil, err
	}
	c.SetReadLimit(maxWebSocketMessage)
	return c, nil
}

// writeJSONMessage sends v as one text message.
func writeJSONMessage(ctx context.Context, c *websocket.Conn, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.Write(ctx, websocket.MessageText, b)
}

// closeReason renders v as a close reason, which the protocol caps at 123
// bytes; a longer one loses its detail rather than the close frame.
func closeReason(v any) string {
	b, err := json.Marshal(v)
	if err != nil || len(b) > 123 {
		return ""
	}
	return string(b)
}

// fittingReason renders wrap(msg) as a close reason, shortening msg until
// it fits.
func fittingReason(msg string, wrap func(string) any) string {
	for n := len(msg); n > 0; n -= 8 {
		if r := closeReason(wrap(strings.ToValidUTF8(msg[:n], ""))); r != "" {
			return r
		}
	}
	return ""
}

// truncateReason cuts a plain-text close reason to the protocol's limit.
func truncateReason(s string) string {
	if len(s) <= 123 {
		return s
	}
	return strings.ToValidUTF8(s[:120], "") + "..."
}
