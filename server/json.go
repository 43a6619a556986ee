package server

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/warren-dev/warren/protocol"
)

// serveJSON serves one Substrat-style request: read the body to EOF by
// deadline, take a slot, reply, close.
func (s *Server) serveJSON(c *net.UnixConn, br *bufio.Reader, p *pendingConn, deadline time.Time) {
	_ = c.SetReadDeadline(deadline)
	if s.base.Err() != nil {
		return
	}
	body, err := io.ReadAll(io.LimitReader(br, int64(s.cfg.MaxFrame)+1))
	w := &jsonWriter{s: s, c: c}
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			if s.base.Err() != nil {
				w.write(&protocol.Frame{Kind: protocol.KindError, Error: protocol.Errorf(protocol.CodeUnavailable, "daemon is shutting down")})
				return
			}
			s.log.Debug("JSON request not complete in time", "read_timeout", s.cfg.ReadTimeout, "first_request_timeout", s.cfg.FirstRequestTimeout)
			w.write(&protocol.Frame{Kind: protocol.KindError, Error: protocol.Errorf(protocol.CodeInvalid,
				"request not received in time (%s): send one JSON object, then half-close the connection (shutdown SHUT_WR)", s.timeoutText())})
			closeAfterReply(c)
			return
		}
		s.log.Debug("reading JSON request failed", "error", err)
		return
	}
	if len(body) > s.cfg.MaxFrame {
		w.write(&protocol.Frame{Kind: protocol.KindError, Error: protocol.Errorf(protocol.CodeInvalid,
			"request larger than the %d-byte limit; send less data", s.cfg.MaxFrame)})
		closeAfterReply(c)
		return
	}
	req, err := protocol.DecodeJSONRequest(body)
	if err != nil {
		f := &protocol.Frame{Kind: protocol.KindError, Error: protocol.AsError(err)}
		if req != nil {
			f.ID = req.ID
		}
		w.write(f)
		return
	}
	if !s.leavePending(p) {
		return
	}
	release, _ := s.takeSlot(req.Method)
	if release == nil {
		s.refuseBusy(c, false)
		return
	}
	defer release()
	ctx, cancel := context.WithCancel(s.base)
	defer cancel()
	st := &stream{write: w.write, id: req.ID, streaming: s.cfg.StreamingMethods[req.Method], ended: w.isEnded}
	res, herr := s.call(ctx, req, st)
	w.end()
	final := s.finalFrame(ctx, req, true, res, herr)
	if err := w.writeFinal(final); err != nil && !errors.Is(err, ErrClientGone) {
		w.writeFinal(encodeFailure(req, true, err))
	}
}

// jsonWriter writes JSON lines with the write timeout, serialised.
type jsonWriter struct {
	s      *Server
	c      *net.UnixConn
	mu     sync.Mutex
	broken bool
	ended  bool
}

func (w *jsonWriter) isEnded() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ended
}

func (w *jsonWriter) end() {
	w.mu.Lock()
	w.ended = true
	w.mu.Unlock()
}

func (w *jsonWriter) write(f *protocol.Frame) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.writeLocked(f)
}

// writeFinal writes the last frame; an encoding error is returned as is so
// the caller can send an error instead.
func (w *jsonWriter) writeFinal(f *protocol.Frame) error {
	return w.write(f)
}

func (w *jsonWriter) writeLocked(f *protocol.Frame) error {
	if w.broken {
		return ErrClientGone
	}
	b, err := protocol.AppendJSONFrame(nil, f)
	if err != nil {
		return err
	}
	if w.s.cfg.WriteTimeout > 0 {
		_ = w.c.SetWriteDeadline(time.Now().Add(w.s.cfg.WriteTimeout))
	}
	if _, err := w.c.Write(b); err != nil {
		w.broken = true
		w.s.log.Debug("writing to JSON client failed", "error", err)
		return errors.Join(ErrClientGone, err)
	}
	return nil
}
