package llm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"time"

	"github.com/warren-dev/warren/internal/sse"
	"github.com/warren-dev/warren/provider"
)

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 64 << 10

// maxMessageBytes is the largest limits.message_bytes the config takes
// (config.MaxMessageBytes), named in the response limit's error.
const maxMessageBytes = 8 << 20

// post sends one request and reads its streamed response. Every failure is
// a provider.Error classified per SPEC 7, except a cancelled ctx, which is
// returned as an error wrapping ctx.Err(). No retry happens here.
//
// post is the one place where what the server sent leaves the exchange:
// the error, the step (text, calls) and the streamed deltas all pass the
// session key's redactor (redact.go).
func (s *session) post(ctx context.Context, st Settings, body io.Reader, size int, onText func(string)) (Step, error) {
	s.key = ""
	if st.APIKeyEnv != "" {
		s.key = s.p.opts.Getenv(st.APIKeyEnv)
		if s.key == "" {
			return Step{}, provider.Permanent(fmt.Errorf("%s: %w: $%s is empty or unset in the daemon's environment; export it and restart the daemon (`warren daemon start` passes its caller's environment)",
				s.where(st), ErrNoKey, st.APIKeyEnv))
		}
	}
	if s.red == nil || s.red.key != s.key {
		s.red = newRedactor(s.key)
	}
	out := s.red.stream(onText)
	step, err := s.exchange(ctx, st, body, size, out.Write)
	if err != nil {
		return Step{}, s.red.error(err)
	}
	out.Flush()
	return s.red.step(step), nil
}

// exchange is post's request and response, with the key in s.key. Its
// errors and its step may hold what the server sent as it is.
func (s *session) exchange(ctx context.Context, st Settings, body io.Reader, size int, onText func(string)) (Step, error) {
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	idle := st.Timeout
	timer := time.AfterFunc(idle, func() { cancel(ErrIdle) })
	defer timer.Stop()

	req, err := http.NewRequestWithContext(rctx, http.MethodPost, s.p.wire.Endpoint(st.BaseURL), body)
	if err != nil {
		return Step{}, provider.Permanent(fmt.Errorf("%s: building the request: %w; check base_url", s.where(st), err))
	}
	req.ContentLength = int64(size)
	for k, v := range st.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	s.p.wire.Auth(req.Header, s.key)
	s.Sent = size

	resp, err := s.p.client.Do(req)
	if err != nil {
		return Step{}, s.ioError(ctx, rctx, err, st, "sending the request")
	}
	rbody := &idleReader{r: resp.Body, timer: timer, idle: idle, left: s.p.opts.MaxResponse, max: s.p.opts.MaxResponse}
	defer func() {
		// Read a little of what is left so the connection can be reused.
		_, _ = io.CopyN(io.Discard, rbody, 4<<10)
		resp.Body.Close()
	}()
	if resp.StatusCode/100 != 2 {
		data, rerr := io.ReadAll(io.LimitReader(rbody, maxErrorBody))
		if rerr != nil && len(data) == 0 && ctx.Err() != nil {
			return Step{}, fmt.Errorf("request cancelled: %w", ctx.Err())
		}
		return Step{}, s.statusError(resp, data, st)
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch {
	case mt == "application/json":
		data, _ := io.ReadAll(io.LimitReader(rbody, maxErrorBody))
		if ae := s.p.wire.ParseError(data); ae != (APIError{}) {
			return Step{}, s.streamError(&StreamError{ae}, st)
		}
		return Step{}, provider.Permanent(fmt.Errorf("%s: %w: HTTP 200 with a JSON body instead of an event stream: %s; the server must support \"stream\": true",
			s.where(st), ErrMalformed, snippet(data)))
	case mt == "text/html":
		data, _ := io.ReadAll(io.LimitReader(rbody, maxErrorBody))
		return Step{}, provider.Permanent(fmt.Errorf("%s: %w: HTTP 200 with an HTML page, not an event stream: %s; check base_url",
			s.where(st), ErrMalformed, snippet(data)))
	}
	if s.sse == nil {
		s.sse = sse.NewReader(rbody, s.p.opts.MaxLine)
	} else {
		s.sse.Reset(rbody)
	}
	r := s.sse
	step, err := s.p.wire.ReadStep(r, StepLimits{MaxText: st.MessageBytes, MaxArgs: st.MessageBytes}, onText)
	if err != nil {
		return Step{}, s.readError(ctx, rctx, err, st)
	}
	return step, nil
}

// readError classifies an error that ended a 200 stream.
func (s *session) readError(ctx, rctx context.Context, err error, st Settings) error {
	var se *StreamError
	switch {
	case errors.As(err, &se):
		return s.streamError(se, st)
	case errors.Is(err, ErrResponseTooLong):
		return provider.Permanent(fmt.Errorf("%s: %w: the model's text in one step passed %d bytes, the message limit (limits.message_bytes); nothing more was read and the turn fails: ask for a shorter answer (or for long output in a file), or raise limits.message_bytes in config.json (at most %d bytes)",
			s.where(st), ErrResponseTooLong, st.MessageBytes, maxMessageBytes))
	case errors.Is(err, ErrMalformed), errors.Is(err, sse.ErrLineTooLong), errors.Is(err, ErrTooLarge):
		return provider.Permanent(fmt.Errorf("%s: %w", s.where(st), err))
	case ctx.Err() != nil || context.Cause(rctx) == ErrIdle:
		return s.ioError(ctx, rctx, err, st, "reading the response stream")
	case errors.Is(err, ErrStreamCut):
		return provider.Transient(fmt.Errorf("%s: %w", s.where(st), err), 0)
	}
	// The connection broke mid-stream (unexpected EOF, reset).
	return provider.Transient(fmt.Errorf("%s: %w: %s", s.where(st), ErrStreamCut, err.Error()), 0)
}

// ioError classifies a transport error: the caller's cancellation is
// returned as such; an idle timeout and connection errors are transient; a
// refused redirect is permanent.
func (s *session) ioError(ctx, rctx context.Context, err error, st Settings, doing string) error {
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("%s: request cancelled: %w", s.where(st), ctx.Err())
	case context.Cause(rctx) == ErrIdle:
		return provider.Transient(fmt.Errorf("%s: %w (%s, timeout_s %d) while %s", s.where(st), ErrIdle, st.Timeout, int(st.Timeout/time.Second), doing), 0)
	case errors.Is(err, errRedirect):
		return provider.Permanent(fmt.Errorf("%s: %w", s.where(st), errRedirect))
	}
	return provider.Transient(fmt.Errorf("%s: connection error while %s: %s", s.where(st), doing, err.Error()), 0)
}

// idleReader restarts the idle timer on every read and enforces the size
// limit of a response.
type idleReader struct {
	r     io.Reader
	timer *time.Timer
	idle  time.Duration
	left  int64
	max   int64
}

func (r *idleReader) Read(p []byte) (int, error) {
	if r.left <= 0 {
		return 0, fmt.Errorf("%w (%d bytes): the server kept sending", ErrTooLarge, r.max)
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.r.Read(p)
	r.left -= int64(n)
	if n > 0 {
		r.timer.Reset(r.idle)
	}
	return n, err
}
