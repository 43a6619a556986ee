// Package natsembed runs NATS servers with JetStream inside the warren
// process: one server (Start: `warren daemon start --cluster-embedded` and
// the tests), or a cluster of servers on loopback with routes between them
// (StartCluster: the tests and benchmarks of one machine). A server runs
// with sync_interval "always" (every JetStream write fsynced) unless told
// otherwise; package jetstream refuses a lazily syncing server unless its
// own UnsafeLazyFsync is set.
//
// A server may let in only signed-in clients (Options.Users, auth.go: an
// nkey user's key and the permissions its caller gives it) and routes
// that present a shared password (Options.RouteSecret, made from a key by
// RoutePassword); Connect is the client's side. Its warnings and errors
// may go to a logger (Options.Logger, log.go), each kind at most once a
// minute.
//
// It is apart from package jetstream, the store over a JetStream cluster
// (which any reachable NATS servers may serve), because running a server is
// a concept of its own: the store neither needs nor knows whether its
// servers run in this process.
package natsembed
