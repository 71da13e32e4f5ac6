package simulator

import (
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/sandplane/sandplane/provider"
)

// A sandbox's TTL (v0.205.1): the sandbox is destroyed ttlMinutes after
// the TTL was set, at create (ttlMinutes) or by setTtl, whatever its state
// or activity. The crons check the deadline beside auto-stop, auto-archive
// and auto-delete (engine.ExpireJob), on the simulator's clock, with
// minutes of Config.Minute; 0 disables it. Daytona bounds a TTL by the
// organization's maximum sandbox lifespan; the simulator has none.

// msgTTL is the 400 of a TTL that is not a whole number of minutes from 0.
const msgTTL = "ttlMinutes must be a non-negative integer"

// autoDestroyAt is sb's TTL deadline, or the zero time for none.
func (sb *sandbox) autoDestroyAt() time.Time {
	if sb.AutoDestroyAt == nil {
		return time.Time{}
	}
	return *sb.AutoDestroyAt
}

// ttlDeadline is the deadline of a TTL of minutes set at now; nil for 0.
func ttlDeadline(now time.Time, minutes int, minute time.Duration) *time.Time {
	if minutes <= 0 {
		return nil
	}
	at := now.Add(provider.IntervalDuration(minutes, minute))
	return &at
}

// parseTTL reads the ttlMinutes path value: a whole number from 0.
func parseTTL(v string) (int, *apiError) {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 || f != math.Trunc(f) || f > math.MaxInt32 {
		return 0, errorf(http.StatusBadRequest, msgTTL)
	}
	return int(f), nil
}

// setTTL re-anchors the sandbox's TTL at now (0 clears it) and answers the
// sandbox, 200 as the document says.
func (s sandboxAPI) setTTL(c *call) (reply, *apiError) {
	tbx := s.toolboxProxyURL(c.r)
	minutes, err := parseTTL(c.params["ttlMinutes"])
	if err != nil {
		return reply{}, err
	}
	return s.withSandbox(c, func(sb *sandbox) (reply, *apiError) {
		now := s.clk.Now()
		sb.AutoDestroyAt = ttlDeadline(now, minutes, s.cfg.Minute)
		sb.UpdatedAt = now
		return reply{http.StatusOK, sb.dto(tbx, false)}, nil
	})
}
