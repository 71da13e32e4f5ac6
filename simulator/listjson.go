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
// page costs a few microseconds per item.

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

// appendListItem appends the SandboxListItem of sb. Called with s.mu held
// (shared is enough).
func appendListItem(b []byte, sb *sandbox, toolboxProxyURL string) []byte {
	b = append(b, `{"id":`...)
	b = appendJSONString(b, sb.ID)
	b = append(b, `,"organizationId":`...)
	b = appendJSONString(b, sb.OrgID)
	b = append(b, `,"name":`...)
	b = appendJSONString(b, sb.Name)
	b = append(b, `,"target":`...)
	b = appendJSONString(b, sb.Target)
	b = append(b, `,"runnerId":`...)
	b = appendNullableString(b, sb.RunnerID)
	b = append(b, `,"sandboxClass":"container","state":`...)
	b = appendJSONString(b, sb.displayState(true))
	b = append(b, `,"desiredState":`...)
	b = appendJSONString(b, sb.Desired)
	b = append(b, `,"snapshot":`...)
	b = appendNullableString(b, sb.Snapshot)
	b = append(b, `,"user":`...)
	b = appendJSONString(b, sb.User)
	b = append(b, `,"errorReason":`...)
	b = appendNullableString(b, sb.ErrorReason)
	b = append(b, `,"recoverable":`...)
	b = strconv.AppendBool(b, sb.Recoverable)
	b = append(b, `,"public":`...)
	b = strconv.AppendBool(b, sb.Public)
	b = append(b, `,"cpu":`...)
	b = strconv.AppendInt(b, int64(sb.CPU), 10)
	b = append(b, `,"gpu":`...)
	b = strconv.AppendInt(b, int64(sb.GPU), 10)
	if sb.GPUType != nil {
		b = append(b, `,"gpuType":`...)
		b = appendJSONString(b, *sb.GPUType)
	}
	b = append(b, `,"memory":`...)
	b = strconv.AppendInt(b, int64(sb.Memory), 10)
	b = append(b, `,"disk":`...)
	b = strconv.AppendInt(b, int64(sb.Disk), 10)
	b = append(b, `,"labels":`...)
	b = appendLabels(b, sb.Labels)
	b = append(b, `,"backupState":`...)
	b = appendJSONString(b, sb.BackupState)
	b = append(b, `,"autoStopInterval":`...)
	b = strconv.AppendInt(b, int64(sb.AutoStop), 10)
	b = append(b, `,"autoArchiveInterval":`...)
	b = strconv.AppendInt(b, int64(sb.AutoArchive), 10)
	b = append(b, `,"autoDeleteInterval":`...)
	b = strconv.AppendInt(b, int64(sb.AutoDelete), 10)
	b = append(b, `,"createdAt":`...)
	b = appendISO(b, sb.CreatedAt)
	b = append(b, `,"updatedAt":`...)
	b = appendISO(b, sb.UpdatedAt)
	b = append(b, `,"lastActivityAt":`...)
	b = appendISO(b, sb.LastActivity)
	b = append(b, `,"daemonVersion":`...)
	b = appendNullableString(b, sb.DaemonVersion)
	b = append(b, `,"toolboxProxyUrl":`...)
	b = appendJSONString(b, toolboxProxyURL)
	return append(b, '}')
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

func appendNullableString(b []byte, p *string) []byte {
	if p == nil {
		return append(b, "null"...)
	}
	return appendJSONString(b, *p)
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
