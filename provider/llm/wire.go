package llm

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/warren-dev/warren/internal/sse"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/tools"
)

// Head is what a request carries before its messages.
type Head struct {
	Model     string
	System    string
	MaxTokens int
	Tools     []tools.Spec
}

// Wire is one API's wire format: how a request is encoded and a streamed
// response read. Implementations are stateless and safe for concurrent use.
type Wire interface {
	// Type is the provider type ("openai", "anthropic").
	Type() string
	// Endpoint is the request URL for an entry's base URL.
	Endpoint(baseURL string) string
	// Auth sets the authentication headers for key ("": none).
	Auth(h http.Header, key string)
	// AppendHead appends the body up to its first message. empty reports
	// that the messages array has no element yet (no leading comma before
	// the first message).
	AppendHead(buf []byte, h Head) (out []byte, empty bool, err error)
	// AppendMessage appends m as one or more comma-separated elements of
	// the messages array. mark is set for the last message of a request
	// (a prompt-cache breakpoint where the API has them).
	AppendMessage(buf []byte, m *Message, mark bool) []byte
	// MarksLast reports whether AppendMessage depends on mark.
	MarksLast() bool
	// Tail closes the body.
	Tail() []byte
	// ReadStep reads the streamed response of one model step, passing text
	// deltas to onText. Its errors wrap ErrStreamCut, ErrMalformed or a
	// *StreamError, or are the reader's I/O errors.
	ReadStep(r *sse.Reader, onText func(string)) (Step, error)
	// ParseError reads an error body (of an HTTP error or an error event).
	ParseError(body []byte) APIError
}

// Step is what one model request produced.
type Step struct {
	Text       string
	Calls      []Call
	Usage      provider.Usage
	StopReason string
}

// APIError is a server's error object.
type APIError struct {
	// Type is the error's type ("rate_limit_error", "server_error", ...).
	Type string
	// Code is the error's code as text (OpenAI's string codes, or numeric
	// codes of compatible servers such as OpenRouter).
	Code    string
	Message string
}

func (e APIError) String() string {
	msg := e.Message
	if msg == "" {
		msg = "(no message)"
	}
	var tags []string
	for _, t := range []string{e.Type, e.Code} {
		if t != "" && !contains(tags, t) {
			tags = append(tags, t)
		}
	}
	if len(tags) > 0 {
		msg += " [" + strings.Join(tags, ", ") + "]"
	}
	return msg
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

var (
	// ErrStreamCut: the response stream ended before its end marker.
	ErrStreamCut = errors.New("the response stream ended before its end (connection cut or server gave up)")
	// ErrMalformed: the server sent something that is not the API's format.
	ErrMalformed = errors.New("malformed response")
	// ErrNoKey: the entry's key variable is not set.
	ErrNoKey = errors.New("API key variable not set")
	// ErrContextLength: the server refused the request as longer than the
	// model's context.
	ErrContextLength = errors.New("context length exceeded")
	// ErrIdle: no byte arrived for the idle timeout.
	ErrIdle = errors.New("no data from the server within the idle timeout")
	// ErrTooLarge: the response exceeded the size limit.
	ErrTooLarge = errors.New("response larger than the limit")
	// ErrTooManySteps: a turn ran more model steps than the limit.
	ErrTooManySteps = errors.New("too many model steps in one turn")
)

// StreamError is an error object the server sent inside a 200 stream.
type StreamError struct{ APIError }

func (e *StreamError) Error() string {
	return fmt.Sprintf("error event in the response stream: %s", e.APIError)
}

// Malformed returns an error wrapping ErrMalformed.
func Malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}
