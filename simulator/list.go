package simulator

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// filter is the query of both list endpoints.
type filter struct {
	idPrefix, namePrefix     string
	idContains, nameContains string
	labels                   map[string]string
	includeErroredDeleted    bool
	states                   []string
	snapshots                []string
	regions                  []string
	classes                  []string
	minCPU, maxCPU           float64
	minMem, maxMem           float64
	minDisk, maxDisk         float64
	isPublic, isRecoverable  *bool
	createdAfter             time.Time
	createdBefore            time.Time
	activityAfter            time.Time
	activityBefore           time.Time
}

func parseFilter(q url.Values, deprecated bool) (filter, *apiError) {
	f := filter{maxCPU: math.Inf(1), maxMem: math.Inf(1), maxDisk: math.Inf(1)}
	if deprecated {
		f.idContains = strings.ToLower(q.Get("id"))
		f.nameContains = strings.ToLower(q.Get("name"))
		f.regions = q["regions"]
	} else {
		f.idPrefix = strings.ToLower(q.Get("id"))
		f.namePrefix = strings.ToLower(q.Get("name"))
		f.regions = q["regionIds"]
		f.classes = q["sandboxClasses"]
		if v := q.Get("createdAtAfter"); v != "" {
			f.createdAfter, _ = time.Parse(time.RFC3339Nano, v)
		}
		if v := q.Get("createdAtBefore"); v != "" {
			f.createdBefore, _ = time.Parse(time.RFC3339Nano, v)
		}
		f.isPublic = boolQuery(q, "isPublic")
		f.isRecoverable = boolQuery(q, "isRecoverable")
	}
	if v := q.Get("labels"); v != "" {
		var m map[string]any
		if err := json.Unmarshal([]byte(v), &m); err != nil {
			return f, errorf(http.StatusBadRequest, "Invalid labels JSON format")
		}
		f.labels = map[string]string{}
		for k, val := range m {
			sv, ok := val.(string)
			if !ok {
				// JSONB containment never matches a non-string against
				// the string labels.
				sv = "\x00" + string(mustJSON(val))
			}
			f.labels[k] = sv
		}
	}
	f.includeErroredDeleted = q.Get("includeErroredDeleted") == "true"
	f.states = q["states"]
	f.snapshots = q["snapshots"]
	for _, b := range []struct {
		key string
		dst *float64
	}{{"minCpu", &f.minCPU}, {"maxCpu", &f.maxCPU}, {"minMemoryGiB", &f.minMem}, {"maxMemoryGiB", &f.maxMem},
		{"minDiskGiB", &f.minDisk}, {"maxDiskGiB", &f.maxDisk}} {
		if v := q.Get(b.key); v != "" {
			n, err := strconv.ParseFloat(v, 64)
			if err == nil {
				*b.dst = n
			}
		}
	}
	if v := q.Get("lastEventAfter"); v != "" {
		f.activityAfter, _ = time.Parse(time.RFC3339Nano, v)
	}
	if v := q.Get("lastEventBefore"); v != "" {
		f.activityBefore, _ = time.Parse(time.RFC3339Nano, v)
	}
	return f, nil
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func boolQuery(q url.Values, key string) *bool {
	v := q.Get(key)
	if v == "" {
		return nil
	}
	b := v == "true"
	return &b
}

// match applies the filter to one row. States compare raw, not derived.
func (f *filter) match(sb *sandbox) bool {
	if sb.gone || sb.State == stDestroyed {
		return false
	}
	if sb.errored() && sb.Desired == dsDestroyed && !f.includeErroredDeleted {
		return false
	}
	if f.idPrefix != "" && !strings.HasPrefix(strings.ToLower(sb.ID), f.idPrefix) ||
		f.namePrefix != "" && !strings.HasPrefix(strings.ToLower(sb.Name), f.namePrefix) ||
		f.idContains != "" && !strings.Contains(strings.ToLower(sb.ID), f.idContains) ||
		f.nameContains != "" && !strings.Contains(strings.ToLower(sb.Name), f.nameContains) {
		return false
	}
	for k, v := range f.labels {
		if got, ok := sb.Labels[k]; !ok || got != v {
			return false
		}
	}
	if len(f.states) > 0 && !slices.Contains(f.states, sb.State) {
		return false
	}
	if len(f.snapshots) > 0 && (sb.Snapshot == nil || !slices.Contains(f.snapshots, *sb.Snapshot)) {
		return false
	}
	if len(f.regions) > 0 && !slices.Contains(f.regions, sb.Target) {
		return false
	}
	if len(f.classes) > 0 && !slices.Contains(f.classes, "container") {
		return false
	}
	cpu, mem, disk := float64(sb.CPU), float64(sb.Memory), float64(sb.Disk)
	if cpu < f.minCPU || cpu > f.maxCPU || mem < f.minMem || mem > f.maxMem || disk < f.minDisk || disk > f.maxDisk {
		return false
	}
	if f.isPublic != nil && sb.Public != *f.isPublic || f.isRecoverable != nil && sb.Recoverable != *f.isRecoverable {
		return false
	}
	if !f.createdAfter.IsZero() && !sb.CreatedAt.After(f.createdAfter) ||
		!f.createdBefore.IsZero() && !sb.CreatedAt.Before(f.createdBefore) ||
		!f.activityAfter.IsZero() && !sb.LastActivity.After(f.activityAfter) ||
		!f.activityBefore.IsZero() && !sb.LastActivity.Before(f.activityBefore) {
		return false
	}
	return true
}

func keyOf(sb *sandbox, field string) sortKey {
	k := rawKeyOf(sb, field)
	k.T = k.T.Truncate(time.Millisecond)
	return k
}

func rawKeyOf(sb *sandbox, field string) sortKey {
	switch field {
	case "name":
		return sortKey{Str: sb.Name}
	case "cpu":
		return sortKey{Num: float64(sb.CPU)}
	case "memoryGib":
		return sortKey{Num: float64(sb.Memory)}
	case "diskGib":
		return sortKey{Num: float64(sb.Disk)}
	case "createdAt":
		return sortKey{T: sb.CreatedAt}
	case "updatedAt":
		return sortKey{T: sb.UpdatedAt}
	case "id":
		return sortKey{Str: sb.ID}
	case "state":
		return sortKey{Str: sb.State}
	case "snapshot":
		if sb.Snapshot != nil {
			return sortKey{Str: *sb.Snapshot}
		}
		return sortKey{}
	case "region":
		return sortKey{Str: sb.Target}
	}
	return sortKey{T: sb.LastActivity}
}

// cursor is the opaque position after the last item of a page.
type cursor struct {
	SortValue any    `json:"sortValue"`
	ID        string `json:"id"`
}

// stringSorted reports whether field sorts by a string (rawKeyOf), which
// its cursor then carries as one: a cursor of such a field carrying a time
// would page through the same rows for ever (the API document allows only
// name of them in a cursor list, but a simulator without validation takes
// any).
func stringSorted(field string) bool {
	switch field {
	case "name", "id", "state", "snapshot", "region":
		return true
	}
	return false
}

// cursorValue is k as a cursor of field carries it.
func cursorValue(k sortKey, field string) any {
	switch {
	case stringSorted(field):
		return k.Str
	case field == "cpu" || field == "memoryGib" || field == "diskGib":
		return k.Num
	}
	return k.T.UTC().Format(isoMillis)
}

func keyFromJSON(field string, v any) (sortKey, bool) {
	switch {
	case stringSorted(field):
		s, ok := v.(string)
		return sortKey{Str: s}, ok
	case field == "cpu" || field == "memoryGib" || field == "diskGib":
		n, ok := v.(float64)
		return sortKey{Num: n}, ok
	}
	s, ok := v.(string)
	if !ok {
		return sortKey{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	return sortKey{T: t}, err == nil
}

// listAPI serves the two sandbox lists over the store's pages.
type listAPI struct{ *Simulator }

func listsOf(s *Simulator) listAPI { return listAPI{s} }

// listResponse is the PaginatedSandboxes schema; listSandboxes writes it
// with appendListItem.
type listResponse struct {
	Items      []sandboxListItemDTO `json:"items"`
	NextCursor *string              `json:"nextCursor"`
}

func (s listAPI) listSandboxes(c *call) (reply, *apiError) {
	q := c.r.URL.Query()
	f, err := parseFilter(q, false)
	if err != nil {
		return reply{}, err
	}
	limit := 100
	if v := q.Get("limit"); v != "" {
		n, perr := strconv.ParseFloat(v, 64)
		switch {
		case perr != nil || n < 1:
			return reply{}, errorf(http.StatusBadRequest, "limit must not be less than 1")
		case n > 200:
			return reply{}, errorf(http.StatusBadRequest, "limit must not be greater than 200")
		}
		limit = int(n)
	}
	field := cmp.Or(q.Get("sort"), "lastActivityAt")
	desc := cmp.Or(q.Get("order"), "desc") == "desc"
	var after *cursor
	var afterKey sortKey
	if raw := q.Get("cursor"); raw != "" {
		b, derr := base64.StdEncoding.DecodeString(raw)
		var cur cursor
		if derr != nil || json.Unmarshal(b, &cur) != nil || cur.ID == "" {
			return reply{}, errorf(http.StatusBadRequest, "Invalid cursor provided: %s", raw)
		}
		k, ok := keyFromJSON(field, cur.SortValue)
		if !ok {
			return reply{}, errorf(http.StatusBadRequest, "Invalid cursor provided: %s", raw)
		}
		after, afterKey = &cur, k
	}
	// The toolboxProxyUrl, the same in every item, is quoted once.
	tbx := appendJSONString(make([]byte, 0, 64), s.toolboxProxyURL(c.r))
	enc := newEncodedJSON()
	body := append(*enc.b, `{"items":[`...)
	buf := pageBufs.Get().(*[]keyed)
	defer func() {
		clear((*buf)[:cap(*buf)]) // the pool keeps no row alive
		pageBufs.Put(buf)
	}()

	s.mu.RLock()
	rows, more := listPage(s.rows, c.org, &f, field, desc, after, afterKey, limit, (*buf)[:0])
	writes := s.mu.WriteCount()
	for i, r := range rows {
		if i > 0 {
			body = append(body, ',')
		}
		body = append(body, cachedListItemHead(r.Row, writes)...)
		body = append(body, tbx...)
		body = append(body, '}')
	}
	s.mu.RUnlock()
	body = append(body, `],"nextCursor":`...)
	if more {
		last := rows[len(rows)-1]
		b, _ := json.Marshal(cursor{SortValue: cursorValue(last.Key, field), ID: last.Row.ID})
		body = appendJSONString(body, base64.StdEncoding.EncodeToString(b))
	} else {
		body = append(body, "null"...)
	}
	*enc.b = append(body, '}')
	return reply{http.StatusOK, enc}, nil
}

type paginatedResponse struct {
	Items      []sandboxDTO `json:"items"`
	Total      int          `json:"total"`
	Page       int          `json:"page"`
	TotalPages int          `json:"totalPages"`
}

// listPaginated is the deprecated page-numbered list: full Sandbox items,
// sorted by createdAt descending unless told otherwise.
func (s listAPI) listPaginated(c *call) (reply, *apiError) {
	q := c.r.URL.Query()
	f, err := parseFilter(q, true)
	if err != nil {
		return reply{}, err
	}
	page, limit := 1, 100
	if v := q.Get("page"); v != "" {
		if n, perr := strconv.ParseFloat(v, 64); perr == nil && n >= 1 {
			page = int(n)
		}
	}
	if v := q.Get("limit"); v != "" {
		if n, perr := strconv.ParseFloat(v, 64); perr == nil && n >= 1 && n <= 200 {
			limit = int(n)
		}
	}
	field := cmp.Or(q.Get("sort"), "createdAt")
	desc := cmp.Or(q.Get("order"), "desc") == "desc"
	tbx := s.toolboxProxyURL(c.r)

	s.mu.RLock()
	defer s.mu.RUnlock()
	total, rows := pageByNumberOf(s.rows, c.org, &f, field, desc, (page-1)*limit, limit)
	resp := paginatedResponse{Items: make([]sandboxDTO, 0, len(rows)), Total: total, Page: page,
		TotalPages: (total + limit - 1) / limit}
	for _, r := range rows {
		resp.Items = append(resp.Items, r.Row.dto(tbx, false))
	}
	return reply{http.StatusOK, resp}, nil
}
