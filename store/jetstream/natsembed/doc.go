// Package natsembed runs NATS servers with JetStream inside the warren
// process: one server (Start: `warren daemon start --cluster-embedded` and
// the tests), or a cluster of servers on loopback with routes between them
// (StartCluster: the tests and benchmarks of one machine). A server runs
// with sync_interval "always" (every JetStream write fsynced) unless told
// otherwise; package jetstream refuses a lazily syncing server unless its
// own UnsafeLazyFsync is set.
//
// It is apart from package jetstream, the store over a JetStream cluster
// (which any reachable NATS servers may serve), because running a server is
// a concept of its own: the store neither needs nor knows whether its
// servers run in this process.
package natsembed
