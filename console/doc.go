// Package console is warren's web console (SPEC 14): an http.Handler the
// daemon serves on its own listener, separate from the socket.
//
// # Routes
//
//	GET  /pair?code=C   consumes a one-time pairing code (Console.Pair,
//	                    console.pair) and sets the session cookie, then
//	                    redirects to /
//	GET  /              the page (static/index.html, app.js, style.css,
//	GET  /static/...    embedded in the binary)
//	POST /api/call      one of the socket's methods: the body is a request
//	                    line of the socket's JSON framing, {"id", "method",
//	                    "params"}; the answer is its result or error frame,
//	                    {"id", "result"} or {"id", "error": {"code",
//	                    "message"}}, from the daemon's own handler
//	GET  /api/events    events.subscribe (ready, deltas=1, agent_id,
//	                    since_seq from the query) as server-sent events:
//	                    each "data:" line is an event frame {"event": {...}}
//
// Every route but /pair needs a live session; POST /api/call also needs the
// header X-Warren-Console: 1, which a cross-site form cannot send and a
// cross-site script cannot send without a CORS preflight the console never
// answers. Streaming methods are not calls (agent.stream: use agent.send and
// watch /api/events). Every answer has Cache-Control: no-store, a
// Content-Security-Policy of 'self' and no framing.
//
// # Sessions
//
// A pairing code is 32 random bytes, kept in memory as its SHA-256 for 5
// minutes and removed on its first use, valid or not. Pairing attempts are
// limited to 20 a minute. A session secret is 32 random bytes sent once as
// the cookie warren_session (HttpOnly, SameSite=Strict, Secure under TLS,
// 30 days); the daemon keeps its SHA-256 and expiry in <home>/console.json:
//
//	{"sessions": [{"hash": "<64 hex>", "expires": "2026-12-29T10:00:00Z"}]}
//
// written atomically (atomicfile, through faultfs). Console.Revoke empties
// it and voids the pending codes.
package console
