package history

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/warren-dev/warren/provider"
)

// Default limits of the history block, in characters (runes).
const (
	DefaultMaxMessage    = 2000
	DefaultMaxToolResult = 500
)

// Headings and fixed lines of the history block.
const (
	BlockTitle          = "RESUME CONTEXT FOR CONTINUING TASK"
	HeadingHistory      = "=== EXECUTION HISTORY ==="
	HeadingInterrupted  = "=== INTERRUPTED TURN ==="
	HeadingCurrent      = "=== CURRENT REQUEST ==="
	HeadingInstructions = "=== INSTRUCTIONS ==="
	NoTurns             = "(no completed turns)"
	InterruptedMark     = "(interrupted: no result recorded)"
	InterruptedNote     = "(This turn was interrupted before it completed. Calls marked interrupted may or may not have taken effect: check before repeating them.)"
	Instructions        = "You are continuing work on the above task after an interruption. The execution history shows what was already done.\nDo not repeat work that was already completed."
)

// BlockOptions sets the truncation limits of Block. Zero or negative values
// take the defaults (2000 and 500 characters).
type BlockOptions struct {
	// MaxMessage limits user prompts and agent responses.
	MaxMessage int
	// MaxToolResult limits tool arguments, results and errors.
	MaxToolResult int
}

func (o BlockOptions) withDefaults() BlockOptions {
	if o.MaxMessage <= 0 {
		o.MaxMessage = DefaultMaxMessage
	}
	if o.MaxToolResult <= 0 {
		o.MaxToolResult = DefaultMaxToolResult
	}
	return o
}

// Block renders the history block injected into the first prompt of a fresh
// provider session (SPEC 4, seed 001); the format is described in the
// package documentation. current is the request the new session must handle.
func Block(h History, current string, opts BlockOptions) string {
	opts = opts.withDefaults()
	var b strings.Builder
	b.Grow(estimate(h, current, opts))
	b.WriteString(BlockTitle + "\n\n" + HeadingHistory + "\n")
	if len(h.Turns) == 0 {
		b.WriteString(NoTurns + "\n")
	}
	for _, t := range h.Turns {
		writeMessage(&b, "USER", t.Message, opts)
		for _, c := range t.Calls {
			writeCall(&b, c, opts, "(no result recorded)")
		}
		writeMessage(&b, "ASSISTANT", t.Response, opts)
	}
	if o := h.Open; o != nil {
		b.WriteString("\n" + HeadingInterrupted + "\n")
		writeMessage(&b, "USER", o.Prompt, opts)
		for _, c := range o.Calls {
			writeCall(&b, c, opts, InterruptedMark)
		}
		b.WriteString(InterruptedNote + "\n")
	}
	b.WriteString("\n" + HeadingCurrent + "\n")
	b.WriteString(Truncate(current, opts.MaxMessage))
	b.WriteString("\n\n" + HeadingInstructions + "\n" + Instructions)
	return b.String()
}

// estimate is an upper-bound guess of the block's size, to size the buffer
// once.
func estimate(h History, current string, opts BlockOptions) int {
	msg := func(s string) int { return min(len(s), 4*opts.MaxMessage) + 64 }
	calls := func(cs []provider.ToolCall) int { return len(cs) * (8*opts.MaxToolResult + 128) }
	n := 1024 + msg(current)
	for _, t := range h.Turns {
		n += msg(t.Message) + msg(t.Response) + calls(t.Calls)
	}
	if h.Open != nil {
		n += msg(h.Open.Prompt) + calls(h.Open.Calls)
	}
	return n
}

func writeMessage(b *strings.Builder, role, msg string, opts BlockOptions) {
	fmt.Fprintf(b, "[%s]: %s\n", role, Truncate(msg, opts.MaxMessage))
}

func writeCall(b *strings.Builder, c provider.ToolCall, opts BlockOptions, noResult string) {
	name := toolName(c.Tool)
	fmt.Fprintf(b, "[TOOL CALL: %s] %s", name, Truncate(jsonText(c.Args), opts.MaxToolResult))
	switch {
	case c.Error != "":
		fmt.Fprintf(b, "\n[TOOL ERROR: %s] %s\n", name, Truncate(c.Error, opts.MaxToolResult))
	case c.Result != nil:
		fmt.Fprintf(b, "\n[TOOL RESULT: %s] %s\n", name, Truncate(jsonText(c.Result), opts.MaxToolResult))
	default:
		b.WriteString(" " + noResult + "\n")
	}
}

// toolName keeps a tool name on one line and out of the bracket syntax.
func toolName(s string) string {
	if s == "" {
		return "unknown"
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == '[' || r == ']' || r == utf8.RuneError {
			return '_'
		}
		return r
	}, Truncate(s, 100))
}

// jsonText renders a value as compact JSON with sorted keys, without HTML
// escaping. A nil map renders as {}.
func jsonText(m map[string]any) string {
	if m == nil {
		return "{}"
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return fmt.Sprintf("(unprintable: %v)", err)
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

// Truncate cuts s to at most max characters (runes), on a rune boundary,
// followed by the marker "…[truncated N chars]" naming how many characters
// were cut. A string within the limit, or max <= 0, is returned unchanged.
func Truncate(s string, max int) string {
	if max <= 0 || len(s) <= max {
		return s // fewer bytes than max means fewer runes too
	}
	n := 0
	for i := range s {
		if n == max {
			rest := utf8.RuneCountInString(s[i:])
			return s[:i] + fmt.Sprintf("…[truncated %d chars]", rest)
		}
		n++
	}
	return s
}
