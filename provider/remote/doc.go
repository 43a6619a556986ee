// Package remote runs provider sessions on remote workers (`warren
// worker`, package worker): the daemon keeps every log, the fold and the
// tools; a worker only starts the agent processes. It is the daemon's side
// of the worker protocol (Directory, Provider, Session, the attempt
// router) and the protocol's message types (wire.go), which the worker
// imports.
//
// # Registration
//
// A worker puts its Registration, JSON, under its id in the JetStream
// key-value bucket "warren-workers" (Bucket) about every second
// (HeartbeatEvery); the bucket keeps a key for 30 s after its last put.
// The daemon makes the bucket (one replica) once a worker's beat on core
// NATS has verified, so a cluster without workers runs no stream for
// them; a worker only binds it (it may not make streams: a stream's
// settings are a request's body, which no permission can check).
// The daemon watches the bucket and counts a worker live while its last
// put reached the daemon less than LiveFor (5 s) ago, on the daemon's own
// clock (no clock comparison between machines). A new Boot is a new
// process: every session the daemon placed on the old one is lost.
//
// # Subjects
//
//	warren.workers.beat            every worker's registration, each beat
//	                               (core NATS: liveness never waits for a
//	                               JetStream leader)
//	warren.worker.<id>.<op>        a worker's NATS micro service
//	                               "warren-worker": open, send, cancel,
//	                               suspend, stop, ping
//	warren.attempt.<d>.<w>.<a>.<kind>
//	                               attempt a's traffic from worker w to
//	                               the daemon whose boot id is d: chunk,
//	                               usage (published), tool, gate
//	                               (requests)
//	warren.stderr.<d>.<w>.<s>      what session s's processes write to
//	                               stderr, from worker w, for the daemon
//	                               d that opened it (published, at most
//	                               StderrChunkMax bytes each; kept in the
//	                               agent's stderr.log, best effort)
//	_INBOX.worker.<w>.>            worker w's reply subjects (InboxPrefix)
//
// The sender of an attempt's traffic and of a session's stderr is the
// worker the subject names: the daemon drops what names another worker
// than the attempt's or the session's. An attempt id is 128 random bits,
// made by the daemon for one Send and known only to it and the worker it
// chose; a daemon subscribes to its own boot's attempts only, so a
// cluster's standbys never see (or answer) the active daemon's traffic.
//
// A registration reaches the daemon twice, by core NATS and by the
// bucket's watch, in either order: only a beat newer than any seen of its
// boot counts, a boot that left (Leaving) or was replaced by a new one
// never comes back, and a boot lost to silence comes back with its next
// beat (a healed partition) with none of its sessions.
//
// While a request to a worker is pending, the daemon pings it every
// ProbeEvery (250 ms). No responder means its connection closed (a kill
// -9: the server drops its subscriptions at once), and the boot is lost
// then; a ping that is not answered in time is left to the heartbeats (a
// frozen process or a vanished machine is lost after LiveFor).
//
// # A turn
//
// Session.Send makes an attempt id, registers it with the daemon's
// router, and requests warren.worker.<id>.send {session, attempt, prompt}.
// The worker runs the turn on its provider session and answers when it
// ends: {response} or {error}.
//
// A session of an agent with a workspace whose entry names an agents'
// remote carries its workspace (package workspace, "Workspaces on
// workers"): the open's spec has {workspace: {remote, lease, branch}},
// which the worker takes up before it starts the agent (the agent's cwd
// is then its copy, not the daemon's path), and each send has
// {workspace: {remote, lease, branch, message}}: the worker takes up that
// attempt's lease before the turn and, when the agent's turn ends, hands
// its copy back and answers {response, snapshot}: after a turn that
// failed, was cancelled or suspended its run too ({error, snapshot}; the
// daemon waits HandBackWait past its cancel for that answer). A take-up, or the hand-back of a turn that
// succeeded, that fails is a transient error: the daemon tries the turn
// again on a new lease. Meanwhile it publishes the turn's chunks
// (each with a sequence number) and usage, and requests each tool call and
// budget gate on the attempt's subjects; the router hands them to the
// attempt's TurnIO, so a tool runs at the daemon and is logged (tool.call)
// before its answer goes back, exactly as for a local process.
//
// An attempt ends when its answer arrives, when its context ends (the
// daemon then publishes cancel {attempt} to the worker), or when its
// worker is lost (no heartbeat for LiveFor, a new boot, no responders).
// A lost worker's Send returns a transient error and the session reports
// Lost: the engine opens the agent's session again, on another worker or
// locally, restored from the log, and retries. Anything a finished
// attempt's worker sends later (a chunk, a tool call, a gate) is dropped
// and logged by the router, and a tool call or gate is answered with
// {"error": {"kind": "abandoned"}}: it never runs.
//
// # Authority
//
// `warren worker token ID` makes an ed25519 key pair, records the public
// key under ID in the home's workers.json (KeysFile:
// {"workers": {"<id>": "<base64url public key>"}}, mode 0600), and prints
// the token "wwt1_<base64url seed>" once. A worker publishes Signed
// beats: its registration's JSON and the signature of exactly those
// bytes. The directory lists (and places sessions on) only workers whose
// beats verify with the key of their id; a refused worker is logged once
// per reason.
//
// The daemon's own key pair (its seed in workers.json as "daemon") is
// made by its first start with an embedded server, or by the first
// token, whichever comes first, and every token carries the daemon's public
// key: "wwt1_<base64url(worker seed || daemon public key)>". Every
// request to a worker (open, send, cancel, suspend, stop; not ping) is an
// AuthedRequest: the request's JSON, the worker's id and the time, with
// their HMAC-SHA256 under the request key the daemon and that worker
// share. That key is the X25519 agreement of the two key pairs (each
// ed25519 key read as its X25519 twin, RFC 7748) through HKDF-SHA256
// (requestkey.go): only the daemon and that worker can make it, and it
// costs a few microseconds per request where an ed25519 signature and
// its check cost about 60 (most of a worker's CPU per turn). Unlike a
// signature, the worker's own token can make it too: a stolen token can
// send that one worker requests, besides acting as it toward the daemon
// (on a daemon's embedded servers only the daemon may publish to a
// worker's subjects). A worker and a daemon from before this key
// (ed25519-signed requests) do not understand each other: upgrade both. A worker obeys only requests for itself, from
// the daemon of its token, made within RequestWindow (2 min) of its
// clock, and whose open's session id or send's attempt id it has not
// seen (no replay); it answers others "refused", which the daemon treats
// as a worker it cannot use.
//
// The same keys are the NATS users of a daemon's embedded server
// (natsembed.Users; daemon/natsusers.go): a daemon makes its key at its
// first start with its own server (DaemonKey), signs in with it, and
// lets in only that key (every permission) and each worker's, held to
// WorkerSubjects: its beats and bucket key, its service, its attempts'
// traffic and stderr, its inbox, and answers to the requests made to it.
// The daemon answers a worker's call only on that worker's inbox: it may
// publish anywhere, so an answer to the reply subject a worker chose
// would be a publish the worker may not make (a stream's delete). Routes
// between a cluster's servers sign in with a password made from the
// daemon's key (natsembed.RoutePassword), so a server without the key
// cannot join.
// A worker signs in with its token's key and uses InboxPrefix. Against
// servers that ask for no key (an external cluster), both connect
// without one, and any client of those servers can read and send
// everything (docs/WORKERS.md).
//
// # Errors
//
// A WireError's kind carries what the engine distinguishes: "transient"
// (retry_after_ms), "permanent", "suspended" (provider.ErrRunSuspended),
// "cannot_restore" (provider.ErrCannotRestore), "canceled",
// "abandoned", "pool_full", "lost" (the worker does not hold the session:
// the daemon opens it again elsewhere), "refused" (as lost).
package remote
