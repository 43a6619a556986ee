package server

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/warren-dev/warren/protocol"
)

// Stream is how a streaming method's handler emits frames. Its methods
// return an error wrapping ErrClientGone when the frame could not be
// written (stop and return), ErrNotStreaming for a method not listed in
// Config.StreamingMethods, and ErrStreamEnded after the handler returned.
// Safe for concurrent use.
type Stream interface {
	// Chunk emits {"chunk": text}.
	Chunk(text string) error
	// Event emits {"event": ev}; ev must encode as a JSON object (a map or
	// a struct).
	Event(ev any) error
}

// Stream errors.
var (
	ErrClientGone   = errors.New("client connection is gone")
	ErrNotStreaming = errors.New("method is not a streaming method; return a result instead")
	ErrStreamEnded  = errors.New("stream already ended: the handler returned")
)

// frameWriter writes one frame for a request on its connection.
type frameWriter func(f *protocol.Frame) error

// stream implements Stream for one request.
type stream struct {
	write     frameWriter
	id        any
	streaming bool
	ended     func() bool
}

func (st *stream) Chunk(text string) error {
	return st.emit(&protocol.Frame{Kind: protocol.KindChunk, ID: st.id, Chunk: text})
}

func (st *stream) Event(ev any) error {
	v, err := protocol.Normalize(ev)
	if err != nil {
		return fmt.Errorf("event: %w", err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("event must encode as a JSON object, got %T", ev)
	}
	return st.emit(&protocol.Frame{Kind: protocol.KindEvent, ID: st.id, Event: m})
}

func (st *stream) emit(f *protocol.Frame) error {
	if !st.streaming {
		return ErrNotStreaming
	}
	if st.ended() {
		return ErrStreamEnded
	}
	return st.write(f)
}

// call runs the handler for req, turning a panic into a code-3 error.
func (s *Server) call(ctx context.Context, req *protocol.Request, out Stream) (res any, err error) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("handler panicked", "method", req.Method, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			res, err = nil, protocol.Errorf(protocol.CodeInternal, "internal error in %s: the handler panicked; see the daemon log", req.Method)
		}
	}()
	if s.log.IsTrace() {
		start := time.Now()
		defer func() {
			s.log.Trace("request", "method", req.Method, "code", protocol.CodeOf(err), "duration", time.Since(start))
		}()
	}
	return s.h.Handle(ctx, req, out)
}

// finalFrame builds the frame that ends request req: an error, a done frame
// for a streaming method, or the result. JSON stream errors carry a null id
// (Substrat compatibility).
func (s *Server) finalFrame(ctx context.Context, req *protocol.Request, json bool, res any, err error) *protocol.Frame {
	streaming := s.cfg.StreamingMethods[req.Method]
	if err != nil {
		pe := s.wireError(ctx, req, err)
		id := req.ID
		if json && streaming {
			id = nil
		}
		return &protocol.Frame{Kind: protocol.KindError, ID: id, Error: pe}
	}
	if streaming {
		return &protocol.Frame{Kind: protocol.KindDone, ID: req.ID}
	}
	return &protocol.Frame{Kind: protocol.KindResult, ID: req.ID, Result: res}
}

// wireError maps a handler error to the error sent: *protocol.Error as is;
// a plain error after shutdown cancelled the request is code 6; anything
// else code 3, logged.
func (s *Server) wireError(ctx context.Context, req *protocol.Request, err error) *protocol.Error {
	var pe *protocol.Error
	if errors.As(err, &pe) && pe != nil {
		return pe
	}
	if s.base.Err() != nil {
		return protocol.Errorf(protocol.CodeUnavailable, "daemon is shutting down; %s was cancelled", req.Method)
	}
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return protocol.Errorf(protocol.CodeUnavailable, "%s was cancelled: %v", req.Method, err)
	}
	s.log.Error("request failed", "method", req.Method, "error", err)
	return &protocol.Error{Code: protocol.CodeInternal, Message: err.Error()}
}

// encodeFailure is the frame sent when a final frame cannot be encoded.
func encodeFailure(req *protocol.Request, json bool, err error) *protocol.Frame {
	if errors.Is(err, protocol.ErrFrameTooLarge) {
		return &protocol.Frame{Kind: protocol.KindError, ID: req.ID,
			Error: protocol.Errorf(protocol.CodeInvalid, "the reply to %s is larger than the %d-byte frame limit, so it is not sent (%v); ask for less: agent.log and agent.inspect take limit and since_seq",
				req.Method, protocol.MaxFrame, err)}
	}
	return &protocol.Frame{Kind: protocol.KindError, ID: req.ID,
		Error: protocol.Errorf(protocol.CodeInternal, "cannot encode the reply to %s: %v", req.Method, err)}
}
