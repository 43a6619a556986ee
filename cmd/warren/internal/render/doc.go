// Package render turns the daemon's replies and the log's entries into
// what a person reads: aligned tables, the agent tree, the agent list in
// natural path order, an agent's inspect view, event and entry lines,
// times as clocks and ages, and the commands printed for the user to run
// next (ShellQuote). Every function writes to the writer it is given and
// asks nothing of the daemon: a view that needs more data takes a
// function that fetches it.
package render
