package server

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/warren-dev/warren/protocol"
)

// serveConn checks the peer, picks the framing, reads the first request
// while the connection is pending (bounded by FirstByteTimeout and
// FirstRequestTimeout, evictable), then serves the connection in a slot.
func (s *Server) serveConn(c *net.UnixConn, p *pendingConn) {
	defer s.dropPending(p)
	uid, err := peerUID(c)
	if err != nil || !s.cfg.AllowUID(uid) {
		s.log.Warn("refusing connection from another user", "peer_uid", uid, "error", err)
		msg := fmt.Sprintf("permission denied: peer uid %d is not allowed to use this daemon (running as uid %d); connect as the daemon's user", uid, os.Getuid())
		if err != nil {
			msg = fmt.Sprintf("permission denied: cannot read the peer's credentials: %v", err)
		}
		_ = c.SetReadDeadline(time.Now().Add(refusalWait))
		var first [1]byte
		n, _ := c.Read(first[:])
		s.writeRefusal(c, n == 1 && first[0] == 0, protocol.Errorf(protocol.CodeInvalid, "%s", msg))
		closeAfterReply(c)
		return
	}
	br := bufio.NewReaderSize(c, 8<<10)
	s.setKick(c, func() { _ = c.SetReadDeadline(time.Now()) })
	reqDeadline := s.firstRequestDeadline(p)
	byteDeadline := reqDeadline
	if s.cfg.FirstByteTimeout > 0 {
		byteDeadline = earliest(time.Now().Add(s.cfg.FirstByteTimeout), reqDeadline)
	}
	_ = c.SetReadDeadline(byteDeadline)
	if s.base.Err() != nil {
		return
	}
	first, err := br.Peek(1)
	if err != nil {
		s.log.Debug("connection closed before sending anything", "error", err)
		return
	}
	// The rest of the first request: within ReadTimeout of its first byte
	// and FirstRequestTimeout of the accept.
	if s.cfg.ReadTimeout > 0 {
		reqDeadline = earliest(time.Now().Add(s.cfg.ReadTimeout), reqDeadline)
	}
	switch {
	case protocol.IsJSONStart(first[0]):
		s.serveJSON(c, br, p, reqDeadline)
	case first[0] == 0:
		s.serveNative(c, br, p, reqDeadline)
	default:
		s.log.Debug("unrecognised framing", "first_byte", first[0])
		s.writeRefusal(c, false, protocol.Errorf(protocol.CodeInvalid,
			"unrecognised framing: first byte 0x%02x; send a JSON object or a native frame (4-byte big-endian length starting with 0x00, then msgpack)", first[0]))
		closeAfterReply(c)
	}
}

// closeAfterReply closes c after the reply is written. Linux resets a Unix
// connection closed with unread input (the peer's read fails with
// ECONNRESET and loses the reply), so it half-closes, then discards input
// until EOF, refusalWait or maxDrain bytes, then closes.
func closeAfterReply(c *net.UnixConn) {
	_ = c.CloseWrite()
	_ = c.SetReadDeadline(time.Now().Add(refusalWait))
	_, _ = io.Copy(io.Discard, io.LimitReader(c, maxDrain))
	c.Close()
}

// writeRefusal writes a connection-level error frame (nil id).
func (s *Server) writeRefusal(c net.Conn, native bool, e *protocol.Error) {
	f := &protocol.Frame{Kind: protocol.KindError, Error: e}
	var b []byte
	var err error
	if native {
		b, err = protocol.EncodeNativeFrame(f)
	} else {
		b, err = protocol.AppendJSONFrame(nil, f)
	}
	if err != nil {
		return
	}
	_ = c.SetWriteDeadline(time.Now().Add(refusalWait))
	_, _ = c.Write(b)
}

// timeoutText describes the bounds on receiving a first request.
func (s *Server) timeoutText() string {
	switch {
	case s.cfg.ReadTimeout > 0 && s.cfg.FirstRequestTimeout > 0:
		return fmt.Sprintf("within %s of its first byte and %s of connecting", s.cfg.ReadTimeout, s.cfg.FirstRequestTimeout)
	case s.cfg.ReadTimeout > 0:
		return fmt.Sprintf("within %s of its first byte", s.cfg.ReadTimeout)
	}
	return fmt.Sprintf("within %s of connecting", s.cfg.FirstRequestTimeout)
}
