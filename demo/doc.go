// Package demo is warren's end-to-end demonstration: a team of agents, a
// crash, a recovery.
//
// Programs returns the team's behaviour for the in-process provider (the
// daemon registers it on its built-in "inproc" provider):
//
//   - model "demo-lead": on its first turn spawns three workers w1, w2, w3
//     (spawn_agent with provider "inproc", model "demo-worker"); on later
//     turns it collects the results the workers' complete() calls deliver as
//     messages, and once all three are in sends USER one message starting
//     with "SUMMARY" that lists them.
//   - model "demo-worker": the workers form a ring (w1 → w2 → w3 → w1). Each
//     turn first works for WorkerDelay (400-700 ms, so the demo can kill the
//     daemon mid-turn), then says "hello from <self>" to its next sibling
//     once, and on the first turn that has seen its previous sibling's hello
//     calls complete with ExpectedResult(self).
//
// The programs keep no state between turns: they read the prompt and the
// session history (after a restart the daemon injects the history into the
// prompt as text), so a re-run turn does what the interrupted one would have
// done.
//
// Run drives the scenario against a real daemon process in a fresh
// temporary home: start the daemon (`<binary> daemon start --foreground`),
// create "lead", send it the task, wait until a worker is mid-turn, SIGKILL
// the daemon, read the logs on disk, restart the daemon, check that the tree,
// the enqueued messages and the interrupted runs came back, resume the
// interrupted runs, and wait for the lead's summary in the USER inbox. Each
// step is printed numbered with ✓ or ✗; Run returns an error wrapping
// ErrCheckFailed naming every check that failed. The temporary home is
// removed on success and kept (its path printed) on failure.
package demo
