// Package offline reads a home's agent files without the daemon, for the
// commands that work while it is down (warren logs, repair, export of a
// local home, completion): it finds every agent from the first entry
// (agent.created) of its log, resolves a reference to a log as the daemon
// resolves it (live agents first, an ambiguous name is an error listing
// the paths, never a random pick), reads and follows a log (fsnotify),
// reads what an agent's processes wrote to stderr, and refuses to repair a
// log kept in a NATS JetStream cluster.
package offline
