// Package protocol is warren's wire protocol (SPEC 8.1): the two framings
// spoken on the daemon's Unix socket, the request, frame and error types,
// the error codes, typed access to params, and the clients.
//
// # Framings
//
// The server tells the framings apart by the first byte a connection sends:
// '{' or JSON whitespace (space, tab, CR, LF) selects newline JSON, 0x00
// selects the native framing, anything else is refused with a JSON error
// line and the connection is closed.
//
// # Newline JSON (Substrat-compatible)
//
// One request per connection. The client writes one JSON object
//
//	{"id": <scalar>, "method": "<name>", "params": {...}}\n
//
// and half-closes its write side (shutdown SHUT_WR). The server reads to EOF
// (at most MaxFrame bytes), parses the whole body as one JSON document (the
// newline is incidental; trailing data other than whitespace is an error),
// writes its reply and closes. "params" may be absent or null (= {}); "id"
// may be any scalar (string, number, boolean, null) and is echoed exactly;
// unknown keys are ignored. Replies are single lines:
//
//	{"id": <id>, "result": {...}}\n             (a nil result is written as {})
//	{"id": <id>, "error": {"code": N, "message": "..."}}\n
//
// A streaming method writes zero or more frames, then a done frame, or a
// single error frame whose id is always null (as Substrat does):
//
//	{"chunk": "<text>"}\n
//	{"event": {...}}\n
//	{"done": true}\n
//	{"id": null, "error": {"code": N, "message": "..."}}\n
//
// A request that cannot be parsed gets an error reply with "id": null, or
// the request's id when it was readable.
//
// # Native framing
//
// Each frame is a 4-byte big-endian payload length followed by that many
// bytes holding one msgpack map with string keys. Payloads longer than
// MaxFrame (16 MiB) are refused and the connection is closed; an empty
// payload is an error. Because a length below 2^24 starts with a zero byte, the first byte
// of a native connection is always 0x00 for its first frame: the first frame
// must therefore be shorter than 16 MiB (2^24 bytes); later frames may be up
// to MaxFrame. The maps carry the same keys as the JSON form:
//
//	request:  {id, method, params}
//	cancel:   {id, cancel: true}     (extension: cancel the in-flight request id)
//	result:   {id, result}
//	error:    {id, error: {code, message}}
//	chunk:    {id, chunk}
//	event:    {id, event}
//	done:     {id, done: true}
//
// Many requests may be in flight on one connection; the server answers each
// by id, possibly out of order, and every stream frame carries the request
// id. A cancel frame gets no reply of its own: the cancelled request ends
// with whatever its handler returns. An error frame with a nil id concerns
// the connection (refused peer, limits, undecodable frame).
//
// The decoder accepts nil, booleans, integers, floats, strings, binary
// (decoded as string), arrays and maps with string keys, nested at most 256
// deep; extension types are refused. Integers decode as int64 or uint64 and
// floats as float64; JSON numbers decode as float64 (ids as json.Number).
// Results and events are normalized to the JSON data model before msgpack
// encoding (see Normalize), so struct json tags apply on both framings.
//
// # Error codes
//
// 1 not found, 2 invalid, 3 internal, 4 unknown method, 5 token rejected,
// 6 unavailable. Handlers choose a code by returning *Error; any other error
// is sent as code 3 with its text.
//
// # Clients and the server's identity
//
// Dial (native), CallJSON and StreamJSON read the server's credentials
// (SO_PEERCRED, PeerCredentials) right after connecting and send nothing
// unless the server runs as this process's effective uid; otherwise they
// return an error wrapping ErrUntrustedServer naming the server's uid and
// pid. Whoever serves a socket sees every request and forges every reply,
// so a socket swapped by another user gets nothing.
package protocol
