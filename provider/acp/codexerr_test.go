package acp

import (
	"errors"
	"strings"
	"testing"

	"github.com/warren-dev/warren/provider"
)

// TestCodexModelFailureIsATurnError: codex-acp reports a failed model
// request as a systemError thread status followed by the error's text and
// stopReason end_turn (captured from codex-acp 2.6.0); the turn is an
// error, transient for an overload or rate limit, permanent otherwise,
// and the error text is not the answer.
func TestCodexModelFailureIsATurnError(t *testing.T) {
	for _, tc := range []struct {
		text      string
		transient bool
	}{
		{"We’re currently experiencing high demand, which may cause temporary errors.", true},
		{"exceeded retry limit, last status: 429 Too Many Requests", true},
		{"unexpected status 401 Unauthorized: invalid api key", false},
	} {
		t.Run(tc.text[:10], func(t *testing.T) {
			e := newEnv(t)
			s := e.create()
			var chunks []string
			resp, err := s.Send(t.Context(), "@say Warning: model metadata not found.\n@codexfail "+tc.text,
				provider.TurnIO{OnChunk: func(c string) { chunks = append(chunks, c) }})
			if !errors.Is(err, ErrModelFailed) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("response %q, err %v: want ErrModelFailed with the agent's text", resp, err)
			}
			if got, _ := provider.IsTransient(err); got != tc.transient {
				t.Fatalf("transient %v, want %v: %v", got, tc.transient, err)
			}
			if strings.Contains(strings.Join(chunks, ""), tc.text) {
				t.Fatalf("the error text was streamed as output: %q", chunks)
			}
			// The next turn is an ordinary one.
			if resp, err := s.Send(t.Context(), "again", provider.TurnIO{}); err != nil || !strings.Contains(resp, "again") {
				t.Fatalf("next turn: %q, %v", resp, err)
			}
		})
	}
}

// TestCodexRecoveredThreadIsNoFailure: a systemError followed by the
// thread going active again in the same turn is no failure; the text
// after the recovery is the answer.
func TestCodexRecoveredThreadIsNoFailure(t *testing.T) {
	e := newEnv(t)
	s := e.create()
	resp, err := s.Send(t.Context(), "@codexfail Reconnecting... 1/5\n@codexactive\n@say the answer", provider.TurnIO{})
	if err != nil || !strings.Contains(resp, "the answer") || strings.Contains(resp, "Reconnecting") {
		t.Fatalf("response %q, err %v", resp, err)
	}
}

// TestTransientRPCCode: an HTTP status as a prompt's error code (Gemini
// CLI's 429 and 5xx) is transient whatever the message says.
func TestTransientRPCCode(t *testing.T) {
	for code, want := range map[int]bool{429: true, 500: true, 503: true, -32603: false, 400: false} {
		if got := transientRPC(&RPCError{Code: code, Message: "fake overload"}); got != want {
			t.Errorf("code %d: %v", code, got)
		}
	}
}
