// Package inproc is warren's deterministic in-process provider, for tests and
// for the demo: nothing but Go, no network, no API key, no subprocess.
//
// Behaviour is selected by the session's model string. A Provider holds a
// table of Programs keyed by model; New registers the built-in "echo" (it
// responds "echo: <prompt>"), and Register adds more. A Program receives a
// *Turn that carries the prompt, the session's completed turns (History),
// the agent's id, model and instructions, and two ways to talk back to the
// daemon: Call (a tool call through TurnIO.Tools, recorded for the history),
// CallBatch (the tool calls of one model step, as a model emitting several
// tool-use blocks at once; run together when TurnIO.Tools is a
// provider.BatchToolCaller, else one by one) and Chunk (streamed text
// through TurnIO.OnChunk). A Program that emits no
// chunk has its whole response streamed as one chunk when it returns.
//
// Wrappers build failure scenarios from programs: FailTransient,
// FailPermanent, Delay, Block, Signal and Sequence. The counters Calls and
// Sends let tests assert how often the daemon called the provider (for
// example, how many retries a transient failure caused).
//
// Sessions and state: every session gets a random hex handle. History is the
// list of turns the session completed (a failed or cancelled turn is not
// recorded); a fresh session starts empty (spec.History is ignored, because
// this provider has no structured history: the daemon injects history into
// the first prompt instead). Suspend returns the small JSON blob
//
//	{"handle": "<hex>", "turns": <number of completed turns>}
//
// never the history itself: the provider declares HistoryOnRestore, so
// Restore with that blob brings the session back with its handle and the
// completed turns the daemon reads from the agent's log (spec.History). A
// blob of the older form {"handle", "history"} is still restored from its
// own history. Restore with a nil (or empty) blob succeeds only when the
// Provider was built with Options.NativeResume and has itself seen the
// handle (a native resume: the history it last recorded for that handle;
// only such a Provider keeps histories); otherwise it returns an error
// wrapping provider.ErrCannotRestore. A
// malformed blob also wraps provider.ErrCannotRestore.
//
// Send runs the program in its own goroutine and returns as soon as the
// program returns or the ctx is cancelled (then with an error wrapping
// ctx.Err()); the Turn handed to a program that outlives its Send rejects
// further calls with ErrTurnOver and drops its chunks. A tool call that
// returns an error wrapping provider.ErrRunSuspended ends the turn with that
// error even if the program swallows it. A panicking program fails the turn
// with a permanent error instead of crashing the daemon.
package inproc
