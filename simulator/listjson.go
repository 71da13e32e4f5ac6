package simulator

import (
	"encoding/json"
	"slices"
	"strconv"
	"sync"
	"time"
)

// A list page is most of what a list costs: 100 to 200 items encoded by
// reflection, a marshaler per nullable column, copied first so that they
// can be encoded after the lock. appendListItem writes an item straight
// from the row instead, byte for byte what encoding/json makes of
// sandboxListItemDTO (TestListItemEncoding holds the two together), so a
// page costs a few microseconds per item. listcache.go keeps each row's
// encoded item between pages, so that a page of unchanged rows copies them.

// encodedJSON is a body writeJSON sends as it is, then gives back to
// bodyBufs: a page is tens of kilobytes, and with 10,000 sandboxes on the
// heap every byte allocated costs about as much again in marking.
type encodedJSON struct{ b *[]byte }

var bodyBufs = sync.Pool{New: func() any {
	b := make([]byte, 0, 64<<10)
	return &b
}}

// newEncodedJSON is an empty body from the pool.
func newEncodedJSON() encodedJSON {
	b := bodyBufs.Get().(*[]byte)
	*b = (*b)[:0]
	return encodedJSON{b}
}

// release gives the buffer back once the body is written.
func (e encodedJSON) release() { bodyBufs.Put(e.b) }

// appendListItem appends the SandboxListItem of sb, encoded afresh.
// Called with s.mu held (shared is enough).
func appendListItem(b []byte, sb *sandbox, toolboxProxyURL string) []byte {
	f := sb.listFields()
	b = appendListItemHead(b, &f, sb.Labels)
	b = appendJSONString(b, toolboxProxyURL)
	return append(b, '}')
}

// appendListItemHead appends the item that f and labels make, up to the
// value of its last member, toolboxProxyUrl, which depends on the request
// and is the caller's to append (then the closing brace).
func appendListItemHead(b []byte, f *listFields, labels map[string]string) []byte {
	b = append(b, `{"id":`...)
	b = appendJSONString(b, f.id)
	b = append(b, `,"organizationId":`...)
	b = appendJSONString(b, f.orgID)
	b = append(b, `,"name":`...)
	b = appendJSONString(b, f.name)
	b = append(b, `,"target":`...)
	b = appendJSONString(b, f.target)
	b = append(b, `,"runnerId":`...)
	b = f.runnerID.appendJSON(b)
	b = append(b, `,"sandboxClass":"container","state":`...)
	b = appendJSONString(b, f.state)
	b = append(b, `,"desiredState":`...)
	b = appendJSONString(b, f.desired)
	b = append(b, `,"snapshot":`...)
	b = f.snapshot.appendJSON(b)
	b = append(b, `,"user":`...)
	b = appendJSONString(b, f.user)
	b = append(b, `,"errorReason":`...)
	b = f.errorReason.appendJSON(b)
	b = append(b, `,"recoverable":`...)
	b = strconv.AppendBool(b, f.recoverable)
	b = append(b, `,"public":`...)
	b = strconv.AppendBool(b, f.public)
	b = append(b, `,"networkBlockAll":`...)
	b = strconv.AppendBool(b, f.networkBlockAll)
	b = append(b, `,"networkAllowList":`...)
	b = f.networkAllowList.appendJSON(b)
	b = append(b, `,"domainAllowList":`...)
	b = f.domainAllowList.appendJSON(b)
	b = append(b, `,"cpu":`...)
	b = strconv.AppendInt(b, int64(f.cpu), 10)
	b = append(b, `,"gpu":`...)
	b = strconv.AppendInt(b, int64(f.gpu), 10)
	if f.gpuType.set {
		b = append(b, `,"gpuType":`...)
		b = appendJSONString(b, f.gpuType.s)
	}
	b = append(b, `,"memory":`...)
	b = strconv.AppendInt(b, int64(f.memory), 10)
	b = append(b, `,"disk":`...)
	b = strconv.AppendInt(b, int64(f.disk), 10)
	b = append(b, `,"labels":`...)
	b = appendLabels(b, labels)
	b = append(b, `,"backupState":`...)
	b = appendJSONString(b, f.backupState)
	b = append(b, `,"autoStopInterval":`...)
	b = strconv.AppendInt(b, int64(f.autoStop), 10)
	b = append(b, `,"autoArchiveInterval":`...)
	b = strconv.AppendInt(b, int64(f.autoArchive), 10)
	b = append(b, `,"autoDeleteInterval":`...)
	b = strconv.AppendInt(b, int64(f.autoDelete), 10)
	b = append(b, `,"autoPauseInterval":`...)
	b = strconv.AppendInt(b, int64(f.autoPause), 10)
	b = append(b, `,"createdAt":`...)
	b = appendISO(b, f.createdAt)
	b = append(b, `,"updatedAt":`...)
	b = appendISO(b, f.updatedAt)
	b = append(b, `,"lastActivityAt":`...)
	b = appendISO(b, f.lastActivity)
	b = append(b, `,"daemonVersion":`...)
	b = f.daemonVersion.appendJSON(b)
	if !f.autoDestroyAt.IsZero() {
		b = append(b, `,"autoDestroyAt":`...)
		b = appendISO(b, f.autoDestroyAt)
	}
	return append(b, `,"toolboxProxyUrl":`...)
}

// appendISO quotes iso(t) without parsing the layout each time; years
// beyond four digits are left to Format.
func appendISO(b []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		b = append(b, '"')
		b = t.AppendFormat(b, isoMillis)
		return append(b, '"')
	}
	hour, minute, sec := t.Clock()
	b = append(b, '"')
	b = appendDigits(b, year, 4)
	b = append(b, '-')
	b = appendDigits(b, int(month), 2)
	b = append(b, '-')
	b = appendDigits(b, day, 2)
	b = append(b, 'T')
	b = appendDigits(b, hour, 2)
	b = append(b, ':')
	b = appendDigits(b, minute, 2)
	b = append(b, ':')
	b = appendDigits(b, sec, 2)
	b = append(b, '.')
	b = appendDigits(b, t.Nanosecond()/int(time.Millisecond), 3)
	return append(b, 'Z', '"')
}

// appendDigits appends n, zero-padded to width digits.
func appendDigits(b []byte, n, width int) []byte {
	var d [4]byte
	for i := width - 1; i >= 0; i-- {
		d[i] = byte('0' + n%10)
		n /= 10
	}
	return append(b, d[:width]...)
}

// appendLabels writes the labels with their keys sorted, as encoding/json
// writes a map.
func appendLabels(b []byte, labels map[string]string) []byte {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		b = appendJSONString(b, labels[k])
	}
	return append(b, '}')
}

// appendJSONString quotes s as encoding/json does: printable ASCII other
// than the quote, the backslash and <, >, & (which it escapes for HTML)
// goes as it is; anything else is left to encoding/json.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
