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
	// deltas to onText, within lim: text past lim.MaxText is an error
	// wrapping ErrResponseTooLong (nothing more is read); a tool call's
	// arguments past lim.MaxArgs are dropped as they arrive (the call
	// comes back with Args "" and ArgsBytes, their size) while the rest of
	// the step is read. Its errors wrap ErrStreamCut, ErrMalformed,
	// ErrResponseTooLong or a *StreamError, or are the reader's I/O errors.
	ReadStep(r *sse.Reader, lim StepLimits, onText func(string)) (Step, error)
	// ParseError reads an error body (of an HTTP error or an error event).
	ParseError(body []byte) APIError
}

// StepLimits bound what one step may hold (ReadStep).
type StepLimits struct {
	// MaxText bounds the step's text in bytes.
	MaxText int
	// MaxArgs bounds one tool call's arguments in bytes.
	MaxArgs int
}

// TextTooLong is the error of a step whose text would pass max bytes.
func (l StepLimits) TextTooLong() error {
	return fmt.Errorf("%w: the model's text passed %d bytes", ErrResponseTooLong, l.MaxText)
}

// StepText gathers a step's text within StepLimits.MaxText and hands each
// delta on as it comes (the wires' text sink).
type StepText struct {
	b   strings.Builder
	max int
	on  func(string)
}

// NewStepText returns a StepText bounded by lim, passing deltas to on.
func NewStepText(lim StepLimits, on func(string)) *StepText {
	return &StepText{max: lim.MaxText, on: on}
}

// Add takes one delta; past the limit it keeps nothing more and returns
// the error wrapping ErrResponseTooLong.
func (t *StepText) Add(s string) error {
	if s == "" {
		return nil
	}
	if t.max > 0 && t.b.Len()+len(s) > t.max {
		return StepLimits{MaxText: t.max}.TextTooLong()
	}
	t.b.WriteString(s)
	t.on(s)
	return nil
}

// String is the text so far.
func (t *StepText) String() string { return t.b.String() }

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
	// ErrResponseTooLong: the model's text of one step passed the
	// response limit (the message limit, limits.message_bytes).
	ErrResponseTooLong = errors.New("response text larger than the message limit")
	// ErrTurnTooLarge: the messages of the turn in progress (its tool
	// calls and results, sent again with every step) passed the per-turn
	// transcript budget (limits.turn_transcript_bytes).
	ErrTurnTooLarge = errors.New("the turn's transcript is larger than its budget")
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
