package worker

import "github.com/warren-dev/warren/provider/remote"

// The agents' stderr: kept here in <dir>/agents/<id>/stderr.log, as the
// daemon keeps a local process's, and also sent to the daemon that
// opened the agent's session (remote.StderrSubject), which keeps it in
// the agent's stderr.log in its home, where `warren logs --stderr` reads
// it. Best effort, as the file is: a message lost with the connection
// is not sent again, and nothing waits for it.

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

// copyStderr is the stderr logs' Copy: it publishes p, in chunks of at
// most remote.StderrChunkMax, to the agent's session's daemon. A publish
// only buffers (core NATS), so a process's stderr never waits on the
// network.
func (w *Worker) copyStderr(agent string, p []byte) {
	w.fwdMu.Lock()
	subject := w.fwd[agent]
	w.fwdMu.Unlock()
	if subject == "" {
		return
	}
	for len(p) > 0 {
		n := min(len(p), remote.StderrChunkMax)
		_ = w.o.Conn.Publish(subject, p[:n])
		p = p[n:]
	}
}
