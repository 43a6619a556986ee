package acp

import (
	"errors"
	"fmt"
	"strings"

	"github.com/warren-dev/warren/provider"
)

// A failed model request in codex-acp (2.6.0, Codex 0.166.0) does not end
// the prompt with an error: the adapter streams the error's text as an
// agent_message_chunk after a session_info_update whose
// _meta.codex.threadStatus.type is "systemError", and answers the prompt
// with stopReason end_turn. Taken at its word, warren would log the error
// text as the agent's answer and its retry policy would never see the
// failure. The provider turns such a turn into an error: transient when
// the text names an overload, a rate limit, a server error or a broken
// connection (Codex says "We're currently experiencing high demand" for a
// 500 and "exceeded retry limit, last status: 429 Too Many Requests" for
// a 429), permanent otherwise (an unknown model, a refused key).

// codexSystemError is codex-acp's thread status of a failed model request.
const codexSystemError = "systemError"

// ErrModelFailed is wrapped by the error of a turn whose agent reported
// that its model request failed.
var ErrModelFailed = errors.New("the agent's model request failed")

// modelFailure is the turn's error when the agent reported a failed model
// request, else nil.
func (s *Session) modelFailure(t *turnState) error {
	t.mu.Lock()
	failed, text := t.failed, strings.TrimSpace(t.failText.String())
	t.mu.Unlock()
	if !failed {
		return nil
	}
	err := fmt.Errorf("entry %q: %w: %s", s.p.opts.Name, ErrModelFailed, clip(text, 500))
	low := strings.ToLower(text)
	for _, w := range []string{"high demand", "retry limit", "429", "500", "502", "503", "504", "529", "overloaded",
		"rate limit", "too many requests", "timeout", "timed out", "connection", "stream disconnected", "temporar"} {
		if strings.Contains(low, w) {
			return provider.Transient(err, 0)
		}
	}
	return provider.Permanent(err)
}
