package render

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// maxValueRunes is how much of each data value an event line shows.
const maxValueRunes = 80

// table writes rows aligned in columns separated by two spaces.
func table(w io.Writer, header []string, rows [][]string) {
	widths := make([]int, len(header))
	all := append([][]string{header}, rows...)
	for _, r := range all {
		for i, cell := range r {
			if i < len(widths) && utf8.RuneCountInString(cell) > widths[i] {
				widths[i] = utf8.RuneCountInString(cell)
			}
		}
	}
	for _, r := range all {
		var b strings.Builder
		for i, cell := range r {
			if i == len(r)-1 {
				b.WriteString(cell)
				break
			}
			b.WriteString(cell)
			b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(cell)+2))
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

// Cut shortens s to n runes, marking the cut, and flattens newlines.
func Cut(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", `\n`)
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// Dash is s, or "-" when s is empty.
func Dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// ShellQuote quotes s for a POSIX shell when it needs quoting.
func ShellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./-=:") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// kvPairs renders a JSON object as `k=v` pairs in key order, values cut to
// maxVal runes.
func kvPairs(data json.RawMessage, maxVal int) string {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		if len(data) == 0 {
			return ""
		}
		return Cut(string(data), maxVal)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+fmtValue(m[k], maxVal))
	}
	return strings.Join(parts, " ")
}

func fmtValue(raw json.RawMessage, maxVal int) string {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		if s == "" || strings.ContainsAny(s, " \t\n\"") {
			return Cut(strconv.Quote(s), maxVal)
		}
		return Cut(s, maxVal)
	}
	return Cut(string(raw), maxVal)
}

// clock formats an RFC 3339 timestamp as local HH:MM:SS (or the input when
// it does not parse).
func clock(ts string, millis bool) string {
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return ts
	}
	return clockT(t, millis)
}

func clockT(t time.Time, millis bool) string {
	if millis {
		return t.Local().Format("15:04:05.000")
	}
	return t.Local().Format("15:04:05")
}

// when shows an RFC 3339 time as local "2006-01-02 15:04:05 (3m ago)" ("-"
// when absent).
func when(now time.Time, ts string) string {
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil || t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05") + " (" + age(now, t) + " ago)"
}

// age is a short duration for a table: 45s, 12m, 3h, 5d.
func age(now, t time.Time) string {
	d := now.Sub(t)
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// agoCell is a table cell "12m ago" for an RFC 3339 time ("-" when absent).
func agoCell(now time.Time, ts string) string {
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil || t.IsZero() {
		return "-"
	}
	return age(now, t) + " ago"
}

// ago shows how long ago an RFC 3339 time was ("-" when unknown).
func ago(now time.Time, ts string) string {
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return "-"
	}
	return now.Sub(t).Round(time.Second).String()
}

// until shows how long until an RFC 3339 time ("overdue" once passed).
func until(now time.Time, ts string) string {
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return "-"
	}
	d := t.Sub(now).Round(time.Second)
	if d <= 0 {
		return "overdue"
	}
	return "in " + d.String()
}

// plural is "1 message", "3 messages".
func plural(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
