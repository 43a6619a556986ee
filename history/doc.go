// Package history rebuilds an agent's turns from its event log entries and
// renders the history block that is injected into the first prompt of a
// fresh provider session (SPEC 4, seeds 001 and 004).
//
// # Beside the projection
//
// Build is the second fold over the agent's log; package projection is
// the first. It sits beside the projection, not on top of it: the
// projection keeps only the latest run, and drops its calls when it ends
// (recovery holds every agent's state in memory, so it keeps what a
// restart needs, not the past), while a history block needs every
// completed turn since the last context.reset with each call's arguments
// and results. Build runs once per fresh provider session, not once per
// entry of every log, so it decodes with encoding/json into its own small
// views of the schema events rather than the projection's fast decoders.
// The two folds agree on the open turn (run, turn, prompt, interruption):
// projection.TestHistoryOpenTurnAgreesWithTheFold checks it on generated
// logs.
//
// The package reads Entry values (seq, event, data) that the daemon converts
// from the event log; it does no I/O and does not import the event log.
//
// # Turns
//
// Build walks the entries in order. turn.start opens a turn; tool.call
// entries (data: call_id, tool, args, result or error, run_id, turn) attach
// to the open turn with the same run_id and turn; turn.complete closes it as
// a completed turn; turn.failed and turn.cancelled roll it back (it is not
// part of the history). context.reset (written by `warren agent reset`)
// forgets every completed turn before it: the agent starts on a fresh
// context, and the log keeps those turns. The latest turn without a terminal event is
// History.Open: its prompt, run, turn number and the calls it already made,
// with run.interrupted / run.waiting / run.resumed reflected in its flags.
// A turn.start with the same run_id and turn as the open turn is a re-run
// (after a resume or a restart): it replaces the prompt and keeps the calls
// already recorded, so that the re-run's calls can be answered from them.
// Data that does not decode is an error wrapping ErrMalformed naming the
// entry's seq; unknown events and fields are ignored.
//
// # Replayed tool calls
//
// RunCalls / RecordedCalls return the calls a run recorded, in order;
// records sharing a call_id are one call (a later record with a result
// completes an earlier one without). The daemon answers a re-run's calls
// through the engine's toolAttempt (engine/tools_attempt.go) from the calls the projection keeps for the
// run (the k-th call from the k-th record when the tool is the same);
// RunCalls and RecordedCalls state that rule over a slice of the log and
// serve this package's tests (the model test holds Build's open turn to
// them).
//
// # History block format
//
// Lines in brackets are fixed markers; <...> are values. Prompts and
// responses are cut to BlockOptions.MaxMessage characters (default 2000),
// tool arguments, results and errors to MaxToolResult (default 500), on rune
// boundaries, followed by "…[truncated N chars]". Arguments and results are
// compact JSON with sorted keys.
//
//	RESUME CONTEXT FOR CONTINUING TASK
//
//	=== EXECUTION HISTORY ===
//	[USER]: <prompt of turn 1>
//	[TOOL CALL: <tool>] <args JSON>
//	[TOOL RESULT: <tool>] <result JSON>
//	[TOOL CALL: <tool>] <args JSON>
//	[TOOL ERROR: <tool>] <error text>
//	[ASSISTANT]: <response of turn 1>
//	[USER]: <prompt of turn 2>
//	[ASSISTANT]: <response of turn 2>
//
//	=== INTERRUPTED TURN ===
//	[USER]: <prompt of the open turn>
//	[TOOL CALL: <tool>] <args JSON>
//	[TOOL RESULT: <tool>] <result JSON>
//	[TOOL CALL: <tool>] <args JSON> (interrupted: no result recorded)
//	(This turn was interrupted before it completed. Calls marked interrupted may or may not have taken effect: check before repeating them.)
//
//	=== CURRENT REQUEST ===
//	<current request>
//
//	=== INSTRUCTIONS ===
//	You are continuing work on the above task after an interruption. The execution history shows what was already done.
//	Do not repeat work that was already completed.
//
// With no completed turns the history section holds the single line
// "(no completed turns)". The INTERRUPTED TURN section appears only when
// History.Open is set. A call of a completed turn without a result shows
// "(no result recorded)". The block has no trailing newline.
package history
