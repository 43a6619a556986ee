package projection

import (
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/inbox"
)

// ResidentPayload is the largest payload a pending message keeps in memory
// (docs/DECISIONS.md, "memory bounded by design"): a larger one is kept
// without it and read back from the log (inbox.Message.Ref) when shown.
const ResidentPayload = 1024

// Queued makes m, logged at e, the form an inbox keeps: with its place in
// the log and, when large, without its payload. The fold and the daemon
// (which queues a message it has just logged) share it, so that a live
// inbox and a replayed one hold the same messages.
func Queued(m inbox.Message, e eventlog.Entry) inbox.Message {
	m.Ref = inbox.Ref{Seq: e.Seq, Off: e.Off}
	if len(m.Payload) > ResidentPayload {
		m = m.Spill()
	}
	return m
}
