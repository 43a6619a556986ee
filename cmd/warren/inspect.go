package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// Policy of the human view of agent inspect.
const (
	inspectInstrLines = 20   // instruction lines shown
	inspectInstrRunes = 2000 // instruction text shown
)

// printInspect renders an agent.inspect result (the inbox aside, which
// comes in pages): one `key:` per line, blocks indented.
func printInspect(w io.Writer, res map[string]any, now time.Time) {
	for _, k := range []string{"agent_id", "name", "path", "parent_id", "status", "provider", "model"} {
		fmt.Fprintf(w, "%-10s %s\n", k+":", dash(str(res, k)))
	}
	if cwd := str(res, "cwd"); cwd != "" {
		fmt.Fprintf(w, "%-10s %s\n", "cwd:", cwd)
	}
	fmt.Fprintf(w, "%-10s %s\n", "created:", when(now, str(res, "created_at")))
	fmt.Fprintf(w, "%-10s %s\n", "last turn:", when(now, str(res, "last_turn_at")))
	fmt.Fprintf(w, "%-10s %s\n", "pending:", plural(num(res, "pending"), "message", "messages"))
	if wait := obj(res, "wait"); wait != nil {
		fmt.Fprintln(w, "wait:")
		keys := make([]string, 0, len(wait))
		for k := range wait {
			if isSecretKey(k) {
				continue // the secret is shown once, to the client that started the run
			}
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "  %-10s %s\n", k+":", cut(str(wait, k), 200))
		}
	}
	if e := str(res, "last_error"); e != "" {
		fmt.Fprintf(w, "%-10s %s\n", "last_error:", cut(e, 300))
	}
	if e := str(res, "degraded"); e != "" {
		fmt.Fprintf(w, "%-10s %s\n", "degraded:", e)
	}
	if u := obj(res, "usage"); u != nil {
		fmt.Fprintf(w, "%-10s %s\n", "tokens:", usageText(u))
	}
	if md := obj(res, "metadata"); len(md) > 0 {
		fmt.Fprintln(w, "metadata:")
		keys := make([]string, 0, len(md))
		for k := range md {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "  %s=%s\n", k, cut(str(md, k), 200))
		}
	}
	if in := str(res, "instructions"); in != "" {
		fmt.Fprintln(w, "instructions:")
		fmt.Fprint(w, indentBlock(in, inspectInstrLines, inspectInstrRunes))
	}
	if kids := list(res, "children"); len(kids) > 0 {
		fmt.Fprintln(w, "children:")
		for _, k := range kids {
			fmt.Fprintf(w, "  %s  %s  [%s]\n", str(k, "agent_id"), str(k, "name"), str(k, "status"))
		}
	}
}

// indentBlock indents text by two spaces, at most maxLines lines and
// maxRunes runes of it, saying what was left out.
func indentBlock(text string, maxLines, maxRunes int) string {
	total := len(text)
	cutShort := false
	if utf8.RuneCountInString(text) > maxRunes {
		text = string([]rune(text)[:maxRunes])
		cutShort = true
	}
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if len(lines) > maxLines {
		lines = lines[:maxLines]
		cutShort = true
	}
	var b strings.Builder
	for _, l := range lines {
		b.WriteString("  " + l + "\n")
	}
	if cutShort {
		fmt.Fprintf(&b, "  … (%d bytes in all; agent inspect --json shows them whole)\n", total)
	}
	return b.String()
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

// plural is "1 message", "3 messages".
func plural(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
