package scripted

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/warren-dev/warren/internal/textcut"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/provider"
)

// logLineMax bounds how much of an ignored line is logged.
const logLineMax = 200

// Session is one scripted session: a script, its history and (between the
// first Send and Stop) a live process.
type Session struct {
	opts   Options
	log    hclog.Logger
	script string
	argv   []string
	env    []string
	dir    string // the agent's working directory ("" = the daemon's)
	// launcher takes part in each process start (credential, record).
	launcher provider.Launcher
	// agent is the identity every fresh process gets on its first turn.
	agent agentLine
	// contextMode: the history goes to a fresh process as "context" (data),
	// not as "history" (a replay).
	contextMode bool

	mu      sync.Mutex
	history []provider.Turn
	proc    *process
	stopped bool
}

var _ provider.Session = (*Session)(nil)

// Handle implements provider.Session: the script's absolute path.
func (s *Session) Handle() string { return s.script }

// History returns the session's completed turns (shared; do not modify).
func (s *Session) History() []provider.Turn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.history[:len(s.history):len(s.history)]
}

// acquire returns the live process, spawning one when there is none or the
// last one exited; fresh says it was just spawned, and hist is then the
// history to pass.
func (s *Session) acquire() (proc *process, hist []provider.Turn, fresh bool, err error) {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return nil, nil, false, provider.Permanent(fmt.Errorf("scripted send: %w; restore or create a new session", ErrStopped))
	}
	var old *process
	if s.proc != nil && s.proc.hasExited() {
		old, s.proc = s.proc, nil
	}
	if s.proc != nil {
		proc = s.proc
		s.mu.Unlock()
		return proc, nil, false, nil
	}
	env := s.env
	var launch provider.Launch
	if s.launcher != nil {
		if launch, err = s.launcher.Prepare(); err != nil {
			s.mu.Unlock()
			if old != nil {
				old.teardown()
			}
			return nil, nil, false, fmt.Errorf("preparing to start scripted agent %q: %w", strings.Join(s.argv, " "), err)
		}
		env = provider.MergeEnv(env, launch.Env())
	}
	proc, err = startProcess(s.opts.Spawner, s.argv, env, s.dir, launch)
	if err != nil {
		s.mu.Unlock()
		if old != nil {
			old.teardown()
		}
		if errors.Is(err, exec.ErrNotFound) && len(s.argv) == 2 && s.argv[0] == s.opts.Python {
			err = fmt.Errorf("%w (%v)", ErrNoPython, err)
		}
		return nil, nil, false, provider.Permanent(fmt.Errorf("cannot start scripted agent %q: %w", strings.Join(s.argv, " "), err))
	}
	s.proc = proc
	hist = s.history[:len(s.history):len(s.history)]
	s.mu.Unlock()
	if old != nil {
		old.teardown()
		s.log.Info("program exited between turns; started a fresh one", "status", old.exitStatus(), "pid", proc.pid)
	} else {
		s.log.Debug("program started", "pid", proc.pid, "history_turns", len(hist))
	}
	return proc, hist, true, nil
}

// drop forgets proc as the session's process (the next Send spawns anew).
func (s *Session) drop(proc *process) {
	s.mu.Lock()
	if s.proc == proc {
		s.proc = nil
	}
	s.mu.Unlock()
}

// turnLine is the daemon-to-program turn message. Agent is set on the
// first turn of a process; History (replay mode) or Context (context
// mode) on the first turn of a process of a session with completed turns.
type turnLine struct {
	Type    string          `json:"type"`
	Message string          `json:"message"`
	History []provider.Turn `json:"history,omitempty"`
	Context []provider.Turn `json:"context,omitempty"`
	Agent   *agentLine      `json:"agent,omitempty"`
}

// agentLine is the "agent" object of a process's first turn line: who the
// agent is. parent and parent_id are null for a root agent.
type agentLine struct {
	ID           string  `json:"id"`
	Name         string  `json:"name"`
	Path         string  `json:"path"`
	Parent       *string `json:"parent"`
	ParentID     *string `json:"parent_id"`
	Instructions string  `json:"instructions"`
}

func newAgentLine(spec provider.Spec) agentLine {
	a := agentLine{ID: spec.AgentID, Name: spec.Identity.Name, Path: spec.Identity.Path, Instructions: spec.Instructions}
	if spec.Identity.ParentID != "" {
		parent, id := spec.Identity.Parent, spec.Identity.ParentID
		a.Parent, a.ParentID = &parent, &id
	}
	return a
}

// firstTurn is the turn line for a freshly spawned process.
func (s *Session) firstTurn(prompt string, hist []provider.Turn) turnLine {
	agent := s.agent
	tl := turnLine{Type: "turn", Message: prompt, Agent: &agent}
	if s.contextMode {
		tl.Context = hist
	} else {
		tl.History = hist
	}
	return tl
}

// Send implements provider.Session; see the package documentation for the
// protocol and the failure modes.
func (s *Session) Send(ctx context.Context, prompt string, tio provider.TurnIO) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("scripted turn not started: %w", err)
	}
	proc, hist, fresh, err := s.acquire()
	if err != nil {
		return "", err
	}
	tl := turnLine{Type: "turn", Message: prompt}
	if fresh {
		tl = s.firstTurn(prompt, hist)
	}
	line, err := json.Marshal(tl)
	if err != nil {
		return "", provider.Permanent(fmt.Errorf("scripted send: encoding the turn: %w", err))
	}
	t := &turn{s: s, proc: proc, ctx: ctx, tio: tio}
	resp, calls, err := t.run(line)
	if err != nil {
		return "", err
	}
	if tio.OnChunk != nil {
		tio.OnChunk(resp)
	}
	s.mu.Lock()
	s.history = append(s.history, provider.Turn{Message: prompt, Calls: calls, Response: resp})
	s.mu.Unlock()
	return resp, nil
}

// Suspend implements provider.Session: {"script", "turns"}, never the
// history (Restore gets it from the daemon, which reads the log). It stops
// nothing.
func (s *Session) Suspend(ctx context.Context) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("scripted suspend: %w", err)
	}
	s.mu.Lock()
	b := blob{Script: s.script, Turns: len(s.history)}
	s.mu.Unlock()
	data, err := json.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("scripted suspend: encoding the blob: %w", err)
	}
	return data, nil
}

// Stop implements provider.Session: close stdin, wait StopGrace, kill the
// process group, reap. Idempotent; later Sends fail with ErrStopped.
func (s *Session) Stop() error {
	s.mu.Lock()
	s.stopped = true
	proc := s.proc
	s.proc = nil
	s.mu.Unlock()
	if proc != nil {
		proc.stop(s.opts.StopGrace)
		s.log.Debug("program stopped", "pid", proc.pid, "status", proc.exitStatus())
	}
	return nil
}

// turn is one Send in progress.
type turn struct {
	s        *Session
	proc     *process
	ctx      context.Context
	tio      provider.TurnIO
	deadline time.Time
	// pending delivers the result of the asynchronous turn-line write.
	pending <-chan error
	// noiseLines and noiseBytes count the lines of this turn that were not
	// protocol lines.
	noiseLines int
	noiseBytes int
}

// flush waits for the turn-line write to finish (deadlines and ctx still
// apply to it).
func (t *turn) flush() error {
	if t.pending == nil {
		return nil
	}
	err := <-t.pending
	t.pending = nil
	return err
}

// settle is called when the program ended the turn: if it did so before
// reading its whole turn line, its stdin holds a partial line and the
// process cannot take another turn, so it is replaced (the turn's outcome
// stands).
func (t *turn) settle() {
	if t.pending == nil {
		return
	}
	// A write that has delivered everything returns nil; one still blocked
	// on a program that stopped reading returns at once with an error.
	_ = t.proc.stdin.SetWriteDeadline(time.Unix(1, 0))
	if err := t.flush(); err != nil {
		t.s.log.Warn("program ended the turn before reading it; replacing the process", "pid", t.proc.pid, "error", err)
		t.s.drop(t.proc)
		t.proc.teardown()
	}
}

// run writes the turn line and handles the program's lines until the turn
// ends. It returns the response and the recorded calls.
func (t *turn) run(line []byte) (string, []provider.ToolCall, error) {
	interrupted := make(chan struct{})
	stop := context.AfterFunc(t.ctx, func() {
		t.proc.interrupt()
		close(interrupted)
	})
	defer func() {
		if !stop() {
			// The interrupt ran or is running: let it finish so it cannot
			// clobber the next turn's deadlines.
			<-interrupted
		}
	}()
	if d := t.s.opts.TurnTimeout; d > 0 {
		t.deadline = time.Now().Add(d)
	}

	if err := t.arm(); err != nil {
		return "", nil, t.fail(err)
	}
	// The turn line (with a long history it can exceed the pipe buffer) is
	// written while the program's output is read, so a program that writes
	// before it reads cannot deadlock with us.
	pending := make(chan error, 1)
	go func() { pending <- t.proc.writeLine(line) }()
	t.pending = pending
	defer t.noiseSummary()
	calls := []provider.ToolCall{}
	for {
		if err := t.arm(); err != nil {
			return "", nil, t.fail(err)
		}
		raw, err := t.proc.readLine(t.s.opts.MaxLine)
		if err != nil {
			return "", nil, t.fail(err)
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
			if err := t.ignore("not a JSON object", raw); err != nil {
				return "", nil, err
			}
			continue
		}
		var typ string
		if err := json.Unmarshal(fields["type"], &typ); err != nil {
			if err := t.ignore("no string \"type\"", raw); err != nil {
				return "", nil, err
			}
			continue
		}
		switch typ {
		case "call":
			rec, err := t.call(fields)
			if err != nil {
				return "", nil, err
			}
			if rec != nil {
				calls = append(calls, *rec)
			}
		case "done":
			t.settle()
			resp, err := textField(fields, "response")
			if err != nil {
				return "", nil, provider.Permanent(fmt.Errorf("scripted agent sent a malformed done line: %w", err))
			}
			return resp, calls, nil
		case "error":
			t.settle()
			msg, err := textField(fields, "message")
			if err != nil {
				msg = string(fields["message"])
			}
			return "", nil, provider.Permanent(fmt.Errorf("scripted agent error: %s", msg))
		default:
			if err := t.ignore("unknown type "+truncate([]byte(typ)), raw); err != nil {
				return "", nil, err
			}
		}
	}
}

// arm sets the turn deadline on the pipes and reports a cancelled ctx. The
// order matters: a cancellation after the check interrupts the new deadline.
func (t *turn) arm() error {
	t.proc.setDeadline(t.deadline)
	return t.ctx.Err()
}

// fail turns an I/O error of the turn into Send's error, disposing of the
// process.
func (t *turn) fail(err error) error {
	t.s.drop(t.proc)
	switch {
	case t.ctx.Err() != nil:
		t.proc.teardown()
		return fmt.Errorf("scripted turn cancelled, process %d killed: %w", t.proc.pid, t.ctx.Err())
	case errors.Is(err, os.ErrDeadlineExceeded):
		t.proc.teardown()
		t.s.log.Warn("turn timed out; process killed", "pid", t.proc.pid, "timeout", t.s.opts.TurnTimeout)
		return provider.Transient(fmt.Errorf("%w after %s: process %d killed, the next turn starts a fresh one with the history",
			ErrTurnTimeout, t.s.opts.TurnTimeout, t.proc.pid), 0)
	case errors.Is(err, ErrLineTooLong):
		t.proc.teardown()
		return provider.Permanent(fmt.Errorf("%w of %d bytes: process %d killed; raise MaxLine or make the script write less", ErrLineTooLong, t.s.opts.MaxLine, t.proc.pid))
	default:
		// EOF or a broken pipe: the program is exiting or gone.
		t.proc.stop(t.s.opts.StopGrace)
		msg := fmt.Sprintf("%s (%s)", ErrExited.Error(), t.proc.exitStatus())
		if tail := strings.TrimSpace(t.proc.stderr.String()); tail != "" {
			msg += ": " + tail
		}
		t.s.log.Warn("program exited mid-turn", "pid", t.proc.pid, "status", t.proc.exitStatus(), "io_error", err)
		if st := t.proc.piped.State(); st != nil && st.Exited() && st.ExitCode() != 0 {
			// The script ended itself with an error (a Python exception
			// exits 1 with its traceback): retrying runs the same code on
			// the same input, so the error is the script's own, permanent.
			// A process killed by a signal (OOM, kill -9) is transient.
			return provider.Permanent(&exitError{msg: msg})
		}
		return provider.Transient(&exitError{msg: msg}, 0)
	}
}

// exitError carries the "exited unexpectedly" text and wraps ErrExited.
type exitError struct{ msg string }

func (e *exitError) Error() string { return e.msg }
func (e *exitError) Unwrap() error { return ErrExited }

// ignore skips a line that is not a protocol line. The first NoiseLogged of
// a turn are logged, the rest only counted (noiseSummary reports them), so
// a program printing junk cannot fill the disk with the daemon's log; past
// MaxNoiseLines or MaxNoiseBytes in one turn the noise is a protocol error:
// the process is killed and the turn fails with an error wrapping ErrNoise.
func (t *turn) ignore(reason string, raw []byte) error {
	t.noiseLines++
	t.noiseBytes += len(raw) + 1
	if t.noiseLines <= t.s.opts.NoiseLogged {
		t.s.log.Warn("ignoring line from scripted agent", "reason", reason, "line", truncate(raw))
		if t.noiseLines == t.s.opts.NoiseLogged {
			t.s.log.Warn("more lines that are not protocol lines are counted, not logged, until the turn ends", "pid", t.proc.pid)
		}
	}
	if t.noiseLines > t.s.opts.MaxNoiseLines || t.noiseBytes > t.s.opts.MaxNoiseBytes {
		t.s.drop(t.proc)
		t.proc.teardown()
		return provider.Permanent(fmt.Errorf("%w: %d lines (%d bytes) in one turn, over the limit of %d lines or %d bytes; process %d killed. Write protocol lines to stdout and logs to stderr",
			ErrNoise, t.noiseLines, t.noiseBytes, t.s.opts.MaxNoiseLines, t.s.opts.MaxNoiseBytes, t.proc.pid))
	}
	return nil
}

// noiseSummary logs, once per turn, how many ignored lines were not logged.
func (t *turn) noiseSummary() {
	if n := t.noiseLines - t.s.opts.NoiseLogged; n > 0 {
		t.s.log.Warn("ignored lines from scripted agent that were not logged", "pid", t.proc.pid, "lines", n, "turn_lines", t.noiseLines, "turn_bytes", t.noiseBytes)
	}
}

// textField decodes fields[key] as a string; absent or null is "".
func textField(fields map[string]json.RawMessage, key string) (string, error) {
	raw, ok := fields[key]
	if !ok || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("%q is not a string: %s", key, truncate(raw))
	}
	return s, nil
}

func truncate(b []byte) string {
	if len(b) <= logLineMax {
		return string(b)
	}
	return fmt.Sprintf("%s... (%d bytes)", textcut.Prefix(string(b), logLineMax), len(b))
}
