package server

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/warren-dev/warren/protocol"
)

// nativeConn serves one native-framing connection: a reader loop that
// decodes frames and starts a goroutine per request (at most MaxInflight;
// more are refused with code 6), and frame writes serialised by a mutex.
type nativeConn struct {
	s      *Server
	c      *net.UnixConn
	br     *bufio.Reader
	ctx    context.Context // cancelled when the connection ends or the server shuts down
	cancel context.CancelFunc
	sem    chan struct{}
	wg     sync.WaitGroup

	wmu    sync.Mutex
	broken bool

	// controlOnly: admitted on a reserved control place, for its first
	// request only; release gives the place back (once) as soon as that
	// request is answered, and the connection then ends.
	controlOnly bool
	release     func()

	mu       sync.Mutex
	inflight map[string][]*inflightReq // by id key, for cancel frames
	count    int
	atHeader bool // the reader is waiting for a frame header
	drain    bool // an error reply was sent: drain input before closing
	started  bool // a request was started (on a control place: its one request)
}

type inflightReq struct {
	cancel context.CancelFunc
	mu     sync.Mutex
	ended  bool
}

func newNativeConn(s *Server, c *net.UnixConn, br *bufio.Reader) *nativeConn {
	ctx, cancel := context.WithCancel(s.base)
	return &nativeConn{
		s: s, c: c, br: br, ctx: ctx, cancel: cancel,
		sem:      make(chan struct{}, s.cfg.MaxInflight),
		inflight: map[string][]*inflightReq{},
	}
}

// idKey makes a map key from a request id; integers compare by value
// whatever their decoded type.
func idKey(id any) string {
	switch x := id.(type) {
	case int64:
		return "n" + strconv.FormatInt(x, 10)
	case uint64:
		return "n" + strconv.FormatUint(x, 10)
	case float64:
		if x == float64(int64(x)) {
			return "n" + strconv.FormatInt(int64(x), 10)
		}
		return "f" + strconv.FormatFloat(x, 'g', -1, 64)
	case string:
		return "s" + x
	}
	return fmt.Sprintf("%T:%v", id, id)
}

// armReadDeadline sets the deadline for the next header read: the idle
// timeout when nothing is in flight, none otherwise, and "now" once the
// connection is ending. Called with mu held.
func (n *nativeConn) armReadDeadlineLocked() {
	switch {
	case n.ctx.Err() != nil:
		_ = n.c.SetReadDeadline(time.Now())
	case n.count == 0 && n.s.cfg.IdleTimeout > 0:
		_ = n.c.SetReadDeadline(time.Now().Add(n.s.cfg.IdleTimeout))
	default:
		_ = n.c.SetReadDeadline(time.Time{})
	}
}

// serveNative reads a native connection's first frame while it is
// pending (by deadline), takes a slot, and serves the connection.
func (s *Server) serveNative(c *net.UnixConn, br *bufio.Reader, p *pendingConn, deadline time.Time) {
	_ = c.SetReadDeadline(deadline)
	if s.base.Err() != nil {
		return
	}
	var hdr [protocol.HeaderSize]byte
	payload, err := func() ([]byte, error) {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return nil, err
		}
		size := binary.BigEndian.Uint32(hdr[:])
		if uint64(size) > uint64(s.cfg.MaxFrame) {
			return nil, errFrameTooLarge{size}
		}
		return protocol.ReadNativePayload(br, size, s.cfg.MaxFrame)
	}()
	var pe *protocol.Error
	var big errFrameTooLarge
	switch {
	case err == nil, errors.As(err, &pe): // a frame, possibly an empty one: the first request is here
	case errors.As(err, &big):
		s.log.Warn("native frame over the size limit; closing connection", "size", big.size, "limit", s.cfg.MaxFrame)
		s.writeRefusal(c, true, protocol.Errorf(protocol.CodeInvalid,
			"frame of %d bytes exceeds the %d-byte limit; closing the connection", big.size, s.cfg.MaxFrame))
		closeAfterReply(c)
		return
	case errors.Is(err, os.ErrDeadlineExceeded) && s.base.Err() == nil:
		s.log.Debug("first native frame not complete in time", "read_timeout", s.cfg.ReadTimeout, "first_request_timeout", s.cfg.FirstRequestTimeout)
		s.writeRefusal(c, true, protocol.Errorf(protocol.CodeInvalid,
			"frame not received within the time allowed (%s); closing the connection", s.timeoutText()))
		closeAfterReply(c)
		return
	default:
		s.log.Debug("native connection read failed", "error", err)
		return
	}
	var req *protocol.Request
	var derr error = pe
	if pe == nil {
		req, derr = protocol.DecodeNativeRequest(payload)
	}
	if !s.leavePending(p) {
		return
	}
	method := ""
	if derr == nil {
		method = req.Method
	}
	release, controlOnly := s.takeSlot(method)
	if release == nil {
		s.refuseBusy(c, true)
		return
	}
	release = onceFunc(release)
	defer release()
	n := newNativeConn(s, c, br)
	n.controlOnly, n.release = controlOnly, release
	n.serve(req, derr)
}

// onceFunc wraps f so that only its first call runs it.
func onceFunc(f func()) func() {
	var once sync.Once
	return func() { once.Do(f) }
}

// errFrameTooLarge is a frame header declaring more than MaxFrame bytes.
type errFrameTooLarge struct{ size uint32 }

func (e errFrameTooLarge) Error() string {
	return fmt.Sprintf("frame of %d bytes is too large", e.size)
}

// serve handles the first frame (already read: its request, or why it
// could not be decoded), then reads and handles frames until the
// connection ends.
func (n *nativeConn) serve(first *protocol.Request, firstErr error) {
	n.s.setKick(n.c, func() {
		n.cancel()
		_ = n.c.SetReadDeadline(time.Now())
	})
	defer func() {
		n.cancel()
		n.wg.Wait()
		n.mu.Lock()
		drain := n.drain
		n.mu.Unlock()
		if drain {
			n.release() // the place is not held while the input drains
			closeAfterReply(n.c)
		}
	}()
	n.handle(first, firstErr)
	for {
		n.mu.Lock()
		n.atHeader = true
		n.armReadDeadlineLocked()
		n.mu.Unlock()
		if n.ctx.Err() != nil {
			return
		}
		var hdr [protocol.HeaderSize]byte
		_, err := io.ReadFull(n.br, hdr[:])
		n.mu.Lock()
		n.atHeader = false
		idle := n.count == 0
		n.mu.Unlock()
		if err != nil {
			n.readFailed(err, idle, true)
			return
		}
		size := binary.BigEndian.Uint32(hdr[:])
		if uint64(size) > uint64(n.s.cfg.MaxFrame) {
			n.s.log.Warn("native frame over the size limit; closing connection", "size", size, "limit", n.s.cfg.MaxFrame)
			n.writeFrame(&protocol.Frame{Kind: protocol.KindError, Error: protocol.Errorf(protocol.CodeInvalid,
				"frame of %d bytes exceeds the %d-byte limit; closing the connection", size, n.s.cfg.MaxFrame)})
			n.setDrain()
			return
		}
		if n.s.cfg.ReadTimeout > 0 {
			_ = n.c.SetReadDeadline(time.Now().Add(n.s.cfg.ReadTimeout))
		} else {
			_ = n.c.SetReadDeadline(time.Time{})
		}
		if n.ctx.Err() != nil { // a kick may have been overridden just now
			return
		}
		payload, err := protocol.ReadNativePayload(n.br, size, n.s.cfg.MaxFrame)
		var pe *protocol.Error
		if err != nil && !errors.As(err, &pe) {
			n.readFailed(err, false, false)
			return
		}
		if pe != nil { // empty frame: framing intact, keep going
			n.handle(nil, pe)
			continue
		}
		n.handle(protocol.DecodeNativeRequest(payload))
	}
}

// handle answers one frame: an error reply when it could not be decoded, a
// cancel, or a request started in its own goroutine (or refused with code
// 6 at the in-flight bound).
func (n *nativeConn) handle(req *protocol.Request, err error) {
	if err != nil {
		f := &protocol.Frame{Kind: protocol.KindError, Error: protocol.AsError(err)}
		if req != nil {
			f.ID = req.ID
		}
		n.writeFrame(f)
		return
	}
	if req.Cancel {
		n.cancelID(req.ID)
		return
	}
	if n.controlOnly && n.startedBefore() {
		// A reserved place serves one control request per connection:
		// the connection ends once it is answered, so that no
		// connection, idle or not, keeps a reserved place.
		n.writeFrame(&protocol.Frame{Kind: protocol.KindError, ID: req.ID, Error: protocol.Errorf(protocol.CodeUnavailable,
			"too many connections to the daemon (limit %d): this connection was admitted on a reserved place for one request to %s, and closes once it is answered; open a new connection for each such request, or retry later",
			n.s.cfg.MaxConns, controlList(n.s.cfg.ControlMethods))})
		return
	}
	select {
	case n.sem <- struct{}{}:
	default:
		// Refuse rather than stop reading: a stalled reader could not
		// see the cancel frames that would free a slot.
		n.writeFrame(&protocol.Frame{Kind: protocol.KindError, ID: req.ID, Error: protocol.Errorf(protocol.CodeUnavailable,
			"too many requests in flight on this connection (limit %d); wait for replies or open another connection", n.s.cfg.MaxInflight)})
		return
	}
	n.start(req)
}

// startedBefore reports whether a request was started on this
// connection before, and marks that one is now.
func (n *nativeConn) startedBefore() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	was := n.started
	n.started = true
	return was
}

// setDrain asks for the input to be drained before the connection closes
// (an error reply was sent, or a reserved place's request was answered).
func (n *nativeConn) setDrain() {
	n.mu.Lock()
	n.drain = true
	n.mu.Unlock()
}

// endControl ends a connection admitted on a reserved control place once
// its request is answered (its place was given back just before the
// answer was written): the reader is woken, and the connection closes
// after its input is drained.
func (n *nativeConn) endControl() {
	n.release()
	n.setDrain()
	n.cancel()
	_ = n.c.SetReadDeadline(time.Now())
}

// readFailed logs why reading stopped and tells the client when useful.
func (n *nativeConn) readFailed(err error, idle, atBoundary bool) {
	switch {
	case n.ctx.Err() != nil:
		// shutting down: in-flight handlers send their own replies
	case errors.Is(err, os.ErrDeadlineExceeded) && idle && atBoundary:
		n.s.log.Debug("closing idle connection", "idle_timeout", n.s.cfg.IdleTimeout)
		n.writeFrame(&protocol.Frame{Kind: protocol.KindError, Error: protocol.Errorf(protocol.CodeUnavailable,
			"connection closed after %s without requests; reconnect", n.s.cfg.IdleTimeout)})
		n.setDrain()
	case errors.Is(err, os.ErrDeadlineExceeded):
		n.s.log.Debug("native frame not complete in time; closing", "read_timeout", n.s.cfg.ReadTimeout)
		n.writeFrame(&protocol.Frame{Kind: protocol.KindError, Error: protocol.Errorf(protocol.CodeInvalid,
			"frame not received within %s; closing the connection", n.s.cfg.ReadTimeout)})
		n.setDrain()
	case err == io.EOF && atBoundary:
		n.s.log.Trace("native client disconnected")
	default:
		n.s.log.Debug("native connection read failed", "error", err)
	}
}

// start runs req in its own goroutine.
func (n *nativeConn) start(req *protocol.Request) {
	ctx, cancel := context.WithCancel(n.ctx)
	ir := &inflightReq{cancel: cancel}
	key := idKey(req.ID)
	n.mu.Lock()
	n.inflight[key] = append(n.inflight[key], ir)
	n.count++
	n.mu.Unlock()
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		st := &stream{write: n.writeFrame, id: req.ID, streaming: n.s.cfg.StreamingMethods[req.Method], ended: ir.isEnded}
		res, err := n.s.call(ctx, req, st)
		ir.end()
		f := n.s.finalFrame(ctx, req, false, res, err)
		cancel()
		// Free the slot before replying: a client that has the reply may
		// send its next request at once.
		n.finish(key, ir)
		<-n.sem
		if n.controlOnly {
			n.release() // likewise the reserved place: this request is its one
		}
		if werr := n.writeFrame(f); werr != nil && !errors.Is(werr, ErrClientGone) {
			n.writeFrame(encodeFailure(req, false, werr))
		}
		if n.controlOnly {
			n.endControl()
		}
	}()
}

func (ir *inflightReq) isEnded() bool {
	ir.mu.Lock()
	defer ir.mu.Unlock()
	return ir.ended
}

func (ir *inflightReq) end() {
	ir.mu.Lock()
	ir.ended = true
	ir.mu.Unlock()
}

// finish unregisters a request and re-arms the idle timer if it was the
// last one.
func (n *nativeConn) finish(key string, ir *inflightReq) {
	n.mu.Lock()
	defer n.mu.Unlock()
	list := n.inflight[key]
	for i, x := range list {
		if x == ir {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(n.inflight, key)
	} else {
		n.inflight[key] = list
	}
	n.count--
	if n.count == 0 && n.atHeader {
		n.armReadDeadlineLocked()
	}
}

// cancelID cancels the in-flight requests with this id.
func (n *nativeConn) cancelID(id any) {
	n.mu.Lock()
	list := n.inflight[idKey(id)]
	n.mu.Unlock()
	for _, ir := range list {
		ir.cancel()
	}
}

// writeFrame encodes and writes one frame under the write mutex. A write
// failure closes the connection (ending the reader and cancelling every
// request) and returns an error wrapping ErrClientGone; an encoding failure
// is returned as is.
func (n *nativeConn) writeFrame(f *protocol.Frame) error {
	b, err := protocol.EncodeNativeFrame(f)
	if err != nil {
		return err
	}
	n.wmu.Lock()
	defer n.wmu.Unlock()
	if n.broken {
		return ErrClientGone
	}
	if n.s.cfg.WriteTimeout > 0 {
		_ = n.c.SetWriteDeadline(time.Now().Add(n.s.cfg.WriteTimeout))
	}
	if _, err := n.c.Write(b); err != nil {
		n.broken = true
		n.s.log.Debug("writing to native client failed; closing", "error", err)
		n.cancel()
		n.c.Close()
		return errors.Join(ErrClientGone, err)
	}
	return nil
}

// controlList names the control methods, sorted.
func controlList(m map[string]bool) string {
	names := make([]string, 0, len(m))
	for k, v := range m {
		if v {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	return strings.Join(names, " and ")
}
