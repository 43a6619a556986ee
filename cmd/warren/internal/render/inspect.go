package render

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/warren-dev/warren/cmd/warren/internal/reply"
)

// Policy of the human view of agent inspect.
const (
	inspectInstrLines = 20   // instruction lines shown
	inspectInstrRunes = 2000 // instruction text shown
)

// Inspect renders an agent.inspect result (the inbox aside, which comes
// in pages: InboxPage): one `key:` per line, blocks indented.
func Inspect(w io.Writer, res map[string]any, now time.Time) {
	for _, k := range []string{"agent_id", "name", "path", "parent_id", "status", "provider", "model"} {
		fmt.Fprintf(w, "%-10s %s\n", k+":", Dash(reply.Str(res, k)))
	}
	if cwd := reply.Str(res, "cwd"); cwd != "" {
		fmt.Fprintf(w, "%-10s %s\n", "cwd:", cwd)
	}
	fmt.Fprintf(w, "%-10s %s\n", "created:", when(now, reply.Str(res, "created_at")))
	fmt.Fprintf(w, "%-10s %s\n", "last turn:", when(now, reply.Str(res, "last_turn_at")))
	fmt.Fprintf(w, "%-10s %s\n", "pending:", plural(reply.Num(res, "pending"), "message", "messages"))
	if wait := reply.Obj(res, "wait"); wait != nil {
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
			fmt.Fprintf(w, "  %-10s %s\n", k+":", Cut(reply.Str(wait, k), 200))
		}
	}
	if e := reply.Str(res, "last_error"); e != "" {
		fmt.Fprintf(w, "%-10s %s\n", "last_error:", Cut(e, 300))
	}
	if e := reply.Str(res, "degraded"); e != "" {
		fmt.Fprintf(w, "%-10s %s\n", "degraded:", e)
	}
	if u := reply.Obj(res, "usage"); u != nil {
		fmt.Fprintf(w, "%-10s %s\n", "tokens:", usageText(u))
	}
	inspectBlocks(w, res)
}

// inspectBlocks renders the metadata, the instructions and the children.
func inspectBlocks(w io.Writer, res map[string]any) {
	if md := reply.Obj(res, "metadata"); len(md) > 0 {
		fmt.Fprintln(w, "metadata:")
		keys := make([]string, 0, len(md))
		for k := range md {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "  %s=%s\n", k, Cut(reply.Str(md, k), 200))
		}
	}
	if in := reply.Str(res, "instructions"); in != "" {
		fmt.Fprintln(w, "instructions:")
		fmt.Fprint(w, indentBlock(in, inspectInstrLines, inspectInstrRunes))
	}
	if kids := reply.List(res, "children"); len(kids) > 0 {
		fmt.Fprintln(w, "children:")
		for _, k := range kids {
			fmt.Fprintf(w, "  %s  %s  [%s]\n", reply.Str(k, "agent_id"), reply.Str(k, "name"), reply.Str(k, "status"))
		}
	}
}

func isSecretKey(k string) bool {
	k = strings.ToLower(k)
	return k == "token" || k == "secret" || k == "token_secret"
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

// InboxPage renders one page of an agent.inspect result's inbox (first:
// the first page, which starts the "inbox:" block when it has messages).
func InboxPage(w io.Writer, msgs []map[string]any, first bool) {
	if first && len(msgs) > 0 {
		fmt.Fprintln(w, "inbox:")
	}
	for _, m := range msgs {
		from := reply.Str(m, "from")
		if from == "" {
			from = reply.Str(m, "sender")
		}
		text := reply.Str(m, "text")
		if text == "" {
			text = reply.Str(m, "payload")
		}
		fmt.Fprintf(w, "  from=%s  %s\n", from, Cut(text, 80))
	}
}
