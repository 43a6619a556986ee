// Package projection folds an agent's event log into its durable state:
// identity and metadata, the status facts (created, terminated, gated,
// suspended, the last error), the latest run with its wait, token state and
// recorded tool calls, the inbox (pending messages, and every id ever
// enqueued, for the enqueue-once rule), subscriptions, reminders, token
// usage, the messages and spawns of recent tool calls, and the last
// resume answered. The event vocabulary is package schema's; the table of
// which event changes what is SPEC 3 and engine/doc.go.
//
// agent.claimed (a cluster store's new owner) sets State.ClaimEpoch to the
// greatest epoch seen; turn.start copies it into Run.ClaimEpoch, so a run
// whose turn began under an earlier claim is told apart (both fields are
// omitted from the checkpoint JSON while zero, as on the local store, so
// local checkpoints keep their bytes).
//
// A State is plain data with no locks and no I/O: State.Apply folds one
// eventlog.Entry, one method per event (fold.go; unknown events are
// skipped, a known event whose data is not its type is an error naming the
// event and the seq). The daemon holds one State per agent under the
// agent's lock, applies each entry it appends, and reads the fields.
//
// # Replay mode
//
// Recovery folds whole logs, millions of entries, on entries whose data it
// borrows from the read buffer. Between BeginReplay and EndReplay the fold
// keeps each small message.enqueued line raw (in an arena of 64 KiB chunks),
// decodes it only if it is still pending at the end, keeps a large one
// decoded without its payload, and reuses the record of an ended run;
// EndReplay moves the pending messages into State.Pending in log order
// (reading those a checkpoint kept by reference through the load function
// it is given) and copies off the arena what outlives the replay. The hot
// events (turn.start, turn.complete/failed/cancelled, tool.call,
// message.enqueued, message.delivered) have fast decoders (fields*.go) that
// accept exactly what encoding/json accepts, into the same values, and
// refuse the rest, which then goes to encoding/json (FuzzFastDecoders,
// FuzzFastMessage, TestFastFoldEqualsJSONFold).
//
// # Checkpoint state
//
// EncodeState writes the state as the daemon's checkpoint file stores it
// after its header line (format version 2, checkpoint/doc.go):
//
//	{"p":<State as JSON>,"pending":[{"id":..,"seq":..,"off":..[,"msg":<envelope>]}],"other_ids":[..]}\n
//	<the enqueued ids of 32 hex digits, concatenated, sorted>\n
//
// The State's exported fields and JSON tags are that format: renaming or
// retagging one is a format change (bump the daemon's checkpointVersion).
// DecodeState returns the state in replay mode, its pending messages by
// reference, for recovery to fold the rest of the log onto.
//
// # Invariants (tests)
//
// TestFoldEachEvent states each event's effect, in live and replay mode.
// TestFoldProperties generates valid logs and checks that the fold is a
// function of the log: two folds give the same state, replay mode gives
// what live mode gives, and folding a prefix, encoding it as a checkpoint,
// decoding it and folding the rest gives what folding the whole log gives,
// wherever the log is cut. TestHistoryOpenTurnAgreesWithTheFold holds
// history.Build, the other fold of the same events, to the same open run.
package projection
