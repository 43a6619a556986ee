// Package notice writes the messages SYSTEM sends on its own (SPEC 6):
// the text of each notice and the id it is enqueued under. A notice's id
// derives from the event it reports (ID), so a notice sent again for the
// same event (at recovery, or when a crash cut the first send off) is
// enqueued once. The engine decides when to send them and to whom; these
// are pure functions.
package notice

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"github.com/warren-dev/warren/internal/textcut"
	"strings"
	"time"
)

// ID is the message id of the notice about the event named by parts: the
// same event always gets the same id.
func ID(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// WaitBegan tells the operator that an agent waits for an answer: the
// agent's path, what it waits for (kind, "" for input), its prompt, the
// wait's token id and deadline, and the command that answers it; never
// the secret.
func WaitBegan(path, kind, prompt, tokenID string, deadline time.Time) string {
	if kind == "" {
		kind = "input"
	}
	return fmt.Sprintf("Agent %s is waiting for your %s: %s\n(token id %s, deadline %s)\nAnswer it with: warren agent resume %s --token-id %s RESPONSE",
		path, kind, prompt, tokenID, deadline.UTC().Format(time.RFC3339), path, tokenID)
}

// MaxListed bounds the pending messages a ChildFailed notice lists.
const MaxListed = 20

// Pending is a pending message as a notice lists it.
type Pending struct{ From, Text string }

// ChildFailed tells a parent that its child name failed its turn with
// lastErr; the child's inbox, total messages of which pending are the
// first, is kept.
func ChildFailed(name, lastErr string, total int, pending []Pending) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Agent %s failed its turn: %s.", name, lastErr)
	if len(pending) > 0 {
		fmt.Fprintf(&b, " Its %d pending message(s) are kept:", total)
		for _, m := range pending {
			fmt.Fprintf(&b, "\n- from %s: %s", m.From, truncate(m.Text, 200))
		}
		if total > len(pending) {
			fmt.Fprintf(&b, "\n- and %d more", total-len(pending))
		}
	}
	fmt.Fprintf(&b, "\nUse poke(agent_name=%q) to retry, or terminate it.", name)
	return b.String()
}

func truncate(s string, n int) string { return textcut.Cut(s, n, "…") }

// Reminder is the notice of reminder id firing; every is its period (0:
// once).
func Reminder(id, reason string, every time.Duration) string {
	text := "Reminder: " + reason
	if every > 0 {
		text += fmt.Sprintf("\n(This reminder repeats every %s; cancel it with cancel_reminder(reminder_id=%q).)", every, id)
	}
	return text
}

// StateChange is the notice of a subscription: agent name went from one
// state to another.
func StateChange(name, from, to string) string {
	return fmt.Sprintf("[state] %s: %s -> %s", name, from, to)
}

// SpawnFailed tells a parent that creating its child name failed.
func SpawnFailed(name string, err error) string {
	return fmt.Sprintf("spawning %q failed: %v", name, err)
}

// Interrupted is one run a start found interrupted, for Resumed.
type Interrupted struct {
	Path, RunID, Reason string
	// Rerun: the resume policy re-ran it; else Left says why it waits
	// for the operator.
	Rerun bool
	Left  string
}

// Resumed tells the operator which runs a start found interrupted, which
// it re-ran (resume policy auto), and how to re-run the rest.
func Resumed(runs []Interrupted) string {
	var b strings.Builder
	var left []string
	rerun := 0
	for _, r := range runs {
		if r.Rerun {
			rerun++
		} else {
			left = append(left, r.Path)
		}
	}
	fmt.Fprintf(&b, "This start found %d interrupted run(s); %d re-run by the resume policy, %d left for you.", len(runs), rerun, len(left))
	for _, r := range runs {
		what := "re-run"
		if !r.Rerun {
			what = "left: " + r.Left
		}
		fmt.Fprintf(&b, "\n- %s: run %s (%s), %s", r.Path, r.RunID, r.Reason, what)
	}
	switch {
	case len(left) == 1:
		fmt.Fprintf(&b, "\nRe-run it with: warren agent resume %s", left[0])
	case len(left) > 1:
		b.WriteString("\nRe-run them with: warren agent resume --all")
	}
	return b.String()
}
