// Package worker is `warren worker`: a process on any machine that runs
// agent sessions for a daemon over NATS, while the daemon keeps every
// log, the fold and the tools. The protocol and its message types are in
// package provider/remote (its doc.go); this package is the worker's
// side of it.
//
// A worker registers in the bucket "warren-workers" every second with its
// pools (provider entry name and size), the live sessions of each, its
// labels and its boot id, and serves the micro service "warren-worker" on
// warren.worker.<id>.{open,send,cancel,suspend,stop}. It resolves a
// provider entry with its own registry and config.json (the entry's
// env_pass and env apply on the worker's machine), and starts agent
// processes exactly as the daemon does: the environment allow-list,
// process groups. An agent whose working directory does not exist on the
// worker's machine runs in <dir>/agents/<agent id>; an agent whose open
// hands over its workspace runs in the worker's copy of it,
// <dir>/workspaces/<agent id> (workspace.go). The copies of agents it
// holds no session of are a cache: the 8 let go last are kept, the
// others removed when an open makes a copy and when the worker starts.
//
// Each send runs one attempt: chunks and usage are published to the
// attempt's subjects, each tool call and budget gate is a request to the
// daemon, and the answer goes back when the turn ends. A cancel, or the
// worker's own stop, cancels the attempt's context (the provider kills
// its process).
//
// An open from a daemon boot other than the one that opened the worker's
// sessions stops those sessions first: a daemon that took over (a
// cluster's standby) never uses an earlier daemon's sessions, so they
// would only hold slots.
package worker
