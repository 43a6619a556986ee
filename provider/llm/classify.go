package llm

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/warren-dev/warren/provider"
)

// MaxRetryAfter caps a server's requested delay.
const MaxRetryAfter = 10 * time.Minute

// RetryAfter reads a server's requested delay: retry-after-ms (milliseconds),
// else Retry-After in seconds or as an HTTP date. 0 when there is none.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	if v := strings.TrimSpace(h.Get("retry-after-ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 && !math.IsInf(ms, 0) {
			return capDelay(time.Duration(ms * float64(time.Millisecond)))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 || math.IsNaN(s) || math.IsInf(s, 0) {
			return 0
		}
		return capDelay(time.Duration(s * float64(time.Second)))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return capDelay(d)
		}
	}
	return 0
}

func capDelay(d time.Duration) time.Duration {
	if d > MaxRetryAfter || d < 0 {
		return MaxRetryAfter
	}
	return d
}

// TransientStatus reports whether an HTTP status is worth retrying (SPEC 7:
// 408, 409, 429, 5xx, 529).
func TransientStatus(code int) bool {
	return code == http.StatusRequestTimeout || code == http.StatusConflict ||
		code == http.StatusTooManyRequests || code >= 500
}

// transientKinds are error types and codes that mean "try again later".
var transientKinds = []string{"overloaded", "rate_limit", "server_error", "api_error", "timeout", "internal_error",
	"service_unavailable", "temporarily_unavailable"}

// permanentKinds win over a transient status: retrying never helps.
var permanentKinds = []string{"insufficient_quota", "billing", "quota_exceeded"}

// TransientKind reports whether an error object's type or code names a
// transient condition (overloaded, rate limit, server error, or a numeric
// code that is a transient HTTP status).
func TransientKind(e APIError) bool {
	for _, k := range []string{e.Type, e.Code} {
		k = strings.ToLower(k)
		if k == "" {
			continue
		}
		if n, err := strconv.Atoi(k); err == nil && TransientStatus(n) {
			return true
		}
		for _, t := range transientKinds {
			if strings.Contains(k, t) {
				return true
			}
		}
	}
	return false
}

func permanentKind(e APIError) bool {
	for _, k := range []string{e.Type, e.Code} {
		k = strings.ToLower(k)
		for _, t := range permanentKinds {
			if k != "" && strings.Contains(k, t) {
				return true
			}
		}
	}
	return false
}

// contextLengthError reports whether an error says the prompt is longer
// than the model's context.
func contextLengthError(e APIError) bool {
	if e.Code == "context_length_exceeded" || e.Type == "context_length_exceeded" {
		return true
	}
	m := strings.ToLower(e.Message)
	for _, s := range []string{"context length", "context_length", "prompt is too long", "maximum context", "context window", "too many tokens"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// snippet is a short, printable form of a body that is not an error object
// (an HTML page from a proxy, say).
func snippet(body []byte) string {
	s := strings.TrimSpace(string(body))
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "?")
	}
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	if s == "" {
		return "(empty body)"
	}
	return s
}

// statusError builds the provider error of a non-2xx response: transient or
// permanent per SPEC 7, with the server's own message and Retry-After.
func (s *session) statusError(resp *http.Response, body []byte, st Settings) error {
	ae := s.p.wire.ParseError(body)
	if ae.Message == "" && ae.Type == "" && ae.Code == "" {
		ae.Message = snippet(body)
	}
	msg := fmt.Sprintf("HTTP %s from %s: %s", resp.Status, s.where(st), ae.String())
	transient := TransientStatus(resp.StatusCode) && !permanentKind(ae)
	switch strings.ToLower(resp.Header.Get("x-should-retry")) {
	case "true":
		transient = true
	case "false":
		transient = false
	}
	switch {
	case resp.StatusCode/100 == 3:
		return provider.Permanent(fmt.Errorf("HTTP %s from %s to %q: %w", resp.Status, s.where(st), resp.Header.Get("Location"), errRedirect))
	case contextLengthError(ae) && !transient:
		return provider.Permanent(fmt.Errorf("%s: %w; lower providers.%s.context_budget (now %d estimated tokens) so that older turns are left out sooner, or start the agent afresh with `warren agent reset`",
			msg, ErrContextLength, s.p.opts.Name, st.ContextBudget))
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		hint := "the entry sends no key"
		if st.APIKeyEnv != "" {
			hint = fmt.Sprintf("check the key in $%s (in the daemon's environment)", st.APIKeyEnv)
		}
		return provider.Permanent(fmt.Errorf("%s; %s", msg, hint))
	case transient:
		return provider.Transient(fmt.Errorf("%s", msg), RetryAfter(resp.Header, s.p.now()))
	default:
		return provider.Permanent(fmt.Errorf("%s", msg))
	}
}

// streamError classifies an error event that arrived after HTTP 200.
func (s *session) streamError(se *StreamError, st Settings) error {
	ae := se.APIError
	err := fmt.Errorf("%s: HTTP 200 then an error event: %s", s.where(st), ae)
	if contextLengthError(ae) && !TransientKind(ae) {
		return provider.Permanent(fmt.Errorf("%w: %w; lower providers.%s.context_budget (now %d estimated tokens)",
			err, ErrContextLength, s.p.opts.Name, st.ContextBudget))
	}
	if TransientKind(ae) && !permanentKind(ae) {
		return provider.Transient(err, 0)
	}
	return provider.Permanent(err)
}

// where names the entry and its base URL in error texts.
func (s *session) where(st Settings) string {
	return fmt.Sprintf("%s entry %q (%s)", s.p.wire.Type(), s.p.opts.Name, st.BaseURL)
}
