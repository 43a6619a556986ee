// Package server is warren's Unix socket listener (SPEC 8.1): it creates the
// owner-only socket, checks each peer's uid, tells the two framings apart by
// the first byte, applies the size, connection and time limits, and
// dispatches requests to a Handler. The framings themselves are in package
// protocol (see its doc.go for the byte formats).
//
// # Socket
//
// Listen refuses a path longer than 107 bytes (protocol.MaxSocketPath)
// naming the limit. It binds inside a fresh 0700 directory beside the path,
// chmods the socket to 0600 and renames it into place, so the socket is
// never reachable with looser permissions whatever the umask (when that
// temporary path would be too long it binds in place and chmods). A stale
// socket at the path (connection refused) is replaced; a live one
// (ErrSocketInUse) or a non-socket file (ErrNotSocket) is an error; nothing
// else is ever removed. Shutdown removes the socket only if it is still the
// one this server created.
//
// # Connections
//
// Each accepted connection is checked with SO_PEERCRED; a uid that
// Config.AllowUID rejects (default: any uid but the server's own) gets an
// error frame, code 2 "permission denied ...", in the framing its first byte
// selects, and is closed.
//
// A connection is pending until its first request has arrived whole: its
// first byte within FirstByteTimeout (5 s), the whole request within
// FirstRequestTimeout of the accept (10 s) and ReadTimeout of its first
// byte. Pending connections hold no slot; at most MaxPending (1,024) of them
// are kept, and a new connection past that bound closes the oldest. So
// connections that send nothing, or dribble bytes, cannot lock clients out.
// Once its first request is read a connection takes one of MaxConns slots;
// when none is free, a first request to one of Config.ControlMethods (the
// daemon's status and shutdown) takes one of ControlReserve extra places,
// and any other gets a code-6 error frame (nil id) and the connection is
// closed, by at most 16 goroutines at once (further ones are closed without
// a reply). A first byte other than '{', JSON whitespace or 0x00 gets a JSON
// error line (code 2) and the connection is closed.
//
// # Reserved control places
//
// A reserved place is held by one request, not by a connection: a
// connection admitted on one is served that first request only (a further
// request on it, sent before the answer, gets code 6 saying so; cancel
// frames still work), and once the answer is written the place is given
// back and the connection is closed (after its remaining input is
// drained, which holds no place). So no connection, idle, streaming or
// answered and left open, keeps a reserved place: the places are only ever
// held by control requests being answered, and the daemon's are answered at
// once (status reads counters, shutdown starts the stop and returns).
// Starving them would take ControlReserve control requests in flight at
// every instant, that is the owner's own processes busy-looping on the
// socket; `warren daemon stop` does not depend even on that, as it falls
// back to a signal (cmd/warren/internal/daemonctl). Slots are different: a
// connection that got a slot keeps it until it ends or is idle for
// IdleTimeout, as a client may make many requests on it. Closing a
// reserved-place connection after one answer suits the command line, which
// opens a connection per request.
//
// JSON connections (Substrat-compatible): the body is read to EOF (the
// client half-closes) within ReadTimeout and MaxFrame bytes, one reply is
// written (a stream of lines for a streaming method), and the connection is
// closed. Malformed JSON, a body that is not an object, a missing method or
// mistyped params get code 2 with "id": null or the request's id.
//
// Native connections carry many requests. Each request runs in its own
// goroutine, at most MaxInflight per connection (a request beyond that is
// answered with code 6 at once, so the reader never stalls and cancel frames
// always get through); frames are written whole
// under a write mutex, in whatever order handlers finish. A frame whose
// declared length exceeds MaxFrame gets an error frame (code 2, nil id) and
// the connection is closed; an undecodable frame gets a code-2 error and the
// connection goes on; a frame not completed within ReadTimeout, or EOF in
// the middle of a frame, closes it. With nothing in flight, a connection
// silent for IdleTimeout gets a code-6 error frame (nil id) and is closed. A
// cancel frame {id, cancel:true} cancels the context of the in-flight
// request with that id. When a native connection ends (EOF, error, write
// failure) the contexts of its in-flight requests are cancelled: a native
// client must keep its write side open until its replies arrive.
//
// # Dispatch
//
// Handler.Handle gets a context cancelled by Shutdown, by a cancel frame and
// by the end of the connection. A *protocol.Error it returns is sent as is;
// a plain error is code 3 (logged), or code 6 when the request was cancelled
// by shutdown or by its context; a panic is recovered, logged with its stack
// and sent as code 3. For a method in Config.StreamingMethods the frames the
// handler emits on its Stream are written as they come, then {"done":true}
// (its result is ignored) or the error frame, whose id is null on the JSON
// framing as in Substrat. For other methods the result is sent (a nil result
// as {}) and Stream calls fail with ErrNotStreaming.
//
// Limits and timeouts come from Config; zero fields take the Default*
// values (256 connections, 1,024 pending, 8 reserved for control, 128
// requests in flight per connection, 5 s first byte, 10 s first request,
// 30 s read, 1 h idle, 1 min write) and a negative timeout disables it.
//
// Shutdown (or cancelling Serve's context) stops accepting, cancels every
// request context, lets handlers send their replies, closes the connections
// and waits for them.
package server
