package escape

import (
	"fmt"
	"strings"
)

// Table is the suite as the Markdown table docs/security.md holds (the
// test checks that it does, word for word): one row per entry, the
// expected result per runtime, and what stops it or lets it through.
func Table() string {
	var b strings.Builder
	b.WriteString("| entry | what the probe tries | native | native-bwrap | docker | what stops it, or lets it through |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- |\n")
	for _, e := range Entries {
		fmt.Fprintf(&b, "| `%s` | %s |", e.Name, e.Tries)
		for _, rt := range Runtimes {
			fmt.Fprintf(&b, " %s |", e.result(rt))
		}
		fmt.Fprintf(&b, " %s |\n", e.why())
	}
	return b.String()
}

// result is e's expected result on rt, in the table's words.
func (e Entry) result(rt Runtime) string {
	g, ok := e.Gaps[rt]
	switch {
	case !ok:
		return "blocked"
	case g.When == AsRoot:
		return "**escapes** with a root daemon"
	case g.When == HostCan:
		return "**escapes** where the daemon's user can"
	default:
		return "**escapes**"
	}
}

// why says per runtime what stops e, or what lets it through.
func (e Entry) why() string {
	var parts []string
	for _, rt := range Runtimes {
		if g, ok := e.Gaps[rt]; ok {
			parts = append(parts, fmt.Sprintf("%s: not stopped (%s)", rt, g.Why))
		} else if s := e.Stops[rt]; s != "" {
			parts = append(parts, fmt.Sprintf("%s: %s", rt, s))
		}
	}
	return strings.Join(parts, "; ")
}
