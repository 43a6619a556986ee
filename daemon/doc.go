// Package daemon is warren's composition root (SPEC 1): it boots a daemon
// (home and lock, config and its watcher, the store, the engine's Core and
// its recovery, the sweep), serves the socket protocol (server.Server with
// the handler of rpc.go), and stops it all in order.
//
// Files: run.go (Run: boot, serve, shutdown; the home's check is package
// homedir's, which the CLI shares), cluster.go (the store:
// local files or a JetStream cluster; cluster_nocluster.go in a build
// with -tags nocluster, which refuses cluster options), clusteropts.go
// (ClusterOptions, CheckCluster, the local store), rpc.go (method dispatch and the one
// map from domain errors to wire codes, toRPCError), rpc_events.go
// (events.subscribe), rpc_agent.go (requests made with an agent's
// credential), rpc_views.go (the wire shapes of the Core's typed views).
//
// The handler holds no lock of its own: each method calls the Core's
// exported methods, which take the engine's locks (engine/doc.go, "Locks").
// Handlers run on the server's goroutine for the connection, one per
// request; a streaming method (agent.stream, events.subscribe) runs until
// its client goes away or the daemon stops.
package daemon
