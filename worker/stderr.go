package worker

import (
	"github.com/warren-dev/warren/provider/remote"
)

// The agents' stderr: kept here in <dir>/agents/<id>/stderr.log, as the
// daemon keeps a local process's, and also sent to the daemon that
// opened the agent's session (remote.StderrSubject), which keeps it in
// the agent's stderr.log in its home, where `warren logs --stderr` reads
// it. Best effort, as the file is: a process's stderr never waits on the
// network. Its writes are queued (stderrQueue chunks at most) and one
// goroutine publishes them; when the queue is full (the connection
// stalled, or a process writing faster than it drains) a chunk is
// dropped and counted, and it stays in the worker's file.

// stderrQueue bounds the chunks waiting to be sent (at most
// remote.StderrChunkMax bytes each: 4 MiB in all).
const stderrQueue = 256

// stderrChunk is one chunk of an agent's stderr for one subject.
type stderrChunk struct {
	subject string
	data    []byte
}

// forward sends agent's stderr to subject (its session's) from now on.
func (w *Worker) forward(agent, subject string) {
	w.fwdMu.Lock()
	w.fwd[agent] = subject
	w.fwdMu.Unlock()
}

// unforward stops sending agent's stderr to subject, unless a newer
// session of the agent took it over.
func (w *Worker) unforward(agent, subject string) {
	w.fwdMu.Lock()
	if w.fwd[agent] == subject {
		delete(w.fwd, agent)
	}
	w.fwdMu.Unlock()
}

// copyStderr is the stderr logs' Copy: it queues a copy of p, in chunks
// of at most remote.StderrChunkMax, for the agent's session's daemon,
// never waiting.
func (w *Worker) copyStderr(agent string, p []byte) {
	w.fwdMu.Lock()
	subject := w.fwd[agent]
	w.fwdMu.Unlock()
	if subject == "" {
		return
	}
	for len(p) > 0 {
		n := min(len(p), remote.StderrChunkMax)
		select {
		case w.stderrQ <- stderrChunk{subject: subject, data: append([]byte(nil), p[:n]...)}:
		default:
			w.stderrDropped.Add(1)
		}
		p = p[n:]
	}
}

// sendStderr publishes the queued chunks until stop is closed, and logs
// how many were dropped since it last said so.
func (w *Worker) sendStderr(stop <-chan struct{}) {
	var reported int64
	for {
		select {
		case <-stop:
			return
		case c := <-w.stderrQ:
			_ = w.o.Conn.Publish(c.subject, c.data)
		}
		if d := w.stderrDropped.Load(); d > reported {
			w.log.Warn("agents' stderr came faster than it could be sent to the daemon; chunks dropped (they are in the worker's stderr.log files)", "dropped", d-reported)
			reported = d
		}
	}
}
