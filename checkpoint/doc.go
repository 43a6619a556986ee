// Package checkpoint reads and writes checkpoint.json, the projection of
// an agent's log folded up to one of its lines, so that recovery folds only
// the lines written since (engine/doc.go, "Checkpoints", says when they are
// written and how recovery checks them).
//
// # Format
//
// checkpoint.json (Name) is in the agent's directory, in three
// newline-terminated lines:
//
//	{"version":3,"seq":N,"off":<byte offset of line N>,"crc":"<line N's crc>","len":<line N's length>,"sum":"<8 hex>"}
//	{"p":{...},"pending":[{"id":...,"seq":...,"off":...}],"other_ids":[...]}
//	<every message id the log enqueued, 32 hex characters each, sorted, concatenated>
//
// sum is the CRC-32C of the bytes after the first line. len counts line
// N's newline; it was added without a new version, as an optional field
// (older checkpoints lack it, and older readers ignore it): with it, a
// start checks a long line N by its ends only (eventlog.Resume). A wrong
// len, like any header that does not match the log, costs a full fold. "p" is the
// projection (name, parent, metadata, the latest run and its wait, gates,
// subscriptions, reminders, the last resume, spawns whose child does not
// exist yet, sent messages whose recipient may lack them; a wait carries
// its start time, which version 1 lacked, so a version-1 checkpoint is
// ignored and its log folded once); "pending" lists
// the messages still pending, in order, by reference (id, seq and offset
// of their message.enqueued line: payloads are never copied; a message
// whose payload is not resident also carries its envelope without the
// payload, "msg", so recovery does not read the payload back); "other_ids"
// holds enqueued ids that are not 32 hex characters.
//
// Version 3 added the lines that witness a state's facts (the
// projection's PrefRef, SessRef, GateRef, Run.StartRef and Run.EndRef)
// and the count of messages taken (Taken); a version-2 checkpoint is
// ignored and its log folded once. Version 4 added the agent's spend
// (Spent: usage.step and completed turns, SPEC 13).
//
// A checkpoint is an optimisation and never the authority: it is written
// without fsync (a temp file and a rename, WriteData; on a cluster, a key
// of the store), and anything that does not check out (no checkpoint, or
// one Decode refuses: a bad sum, another version, a state that does not
// match its line; then the daemon's checks of the state against the lines
// it came from, projection/verify.go) makes recovery fold the
// whole log instead.
package checkpoint
