// Package scripted is warren's subprocess provider: the model is a program
// (a deterministic, non-LLM agent) that speaks JSON lines on stdin/stdout,
// wire-compatible with Substrat's scripted provider.
//
// # Program and process
//
// The session's model is the program's path. A path ending in ".py" runs as
// `<Options.Python> <path>` (default python3); anything else is executed
// directly (it needs its execute bit and, for a script, a #! line). A
// relative path is resolved against the daemon's working directory when the
// session is created or restored, and must exist there; it is an error
// otherwise (the daemon has no per-agent workspace to resolve against, and
// guessing would run the wrong file). The session's handle is the resolved
// absolute path.
//
// Create starts nothing: the process is spawned on the first Send through
// Options.Spawner (agentproc: its own process group, killed by the kernel
// when the daemon dies, the rest of its group killed when it exits). Its
// environment is the default allow-list of the daemon's
// (provider.ProcessEnv), then Spec.Env (where the daemon passes the entry's
// env_pass and env settings, WARREN_SOCKET, WARREN_AGENT_ID and PYTHONPATH),
// then, when Spec.Launcher is set, the per-process entries of
// Launcher.Prepare (WARREN_AGENT_CREDENTIAL, WARREN_AGENT_PROCESS); later
// entries win. Nothing else of the daemon's environment reaches it.
// Launch.Started is called before
// the process is given its first line (an error kills it and fails the
// turn), Launch.Ended once it has been reaped. It is long-lived: between
// turns it blocks reading stdin. One call is outstanding at a time on
// stdin/stdout; a program (or its helpers) may also call tools over the
// socket with its credential, as calls of the same turn (daemon).
//
// # Wire protocol
//
// One JSON object per line, '\n'-terminated, UTF-8. Daemon to program:
//
//	{"type":"turn","message":"<prompt>"}
//	{"type":"turn","message":"<prompt>","agent":{...},"history":[<turn>...]}
//	{"type":"turn","message":"<prompt>","agent":{...},"context":[<turn>...]}
//	{"type":"result","id":<the call's id>,"data":{...}}
//	{"type":"result","id":<the call's id>,"error":"<text>"}
//
// The first turn written to a freshly spawned process carries "agent", who
// the agent is (Spec.AgentID, Spec.Identity, Spec.Instructions, as they were
// when the session opened):
//
//	{"id":"<32 hex>","name":"worker","path":"lead/worker","parent":"lead",
//	 "parent_id":"<32 hex>","instructions":".."}
//
// with "parent" and "parent_id" null for a root agent (which reports to
// USER). Keys are only ever added to the turn line, so Substrat programs,
// which read "message" and "history", keep working.
//
// That first turn also carries the session's completed turns, when it has
// any, in one of two keys chosen by Spec.HistoryMode (the daemon takes it
// from the agent's metadata "history", else the provider entry's "history"
// setting; any value other than "replay" and "context" is refused at Create
// and Restore with a permanent error wrapping ErrHistoryMode):
//
//   - "history" (mode "replay", the default): a replay the program
//     re-executes to rebuild its state (the Python helper hands each
//     recorded turn and call result back to the program's own code, and
//     fails with AssertionError when the code calls another tool).
//   - "context" (mode "context"): the same entries as data; the program
//     reads them (Python: context()) and nothing is replayed, so a program
//     whose code changed, or that asks an LLM, goes on after an eviction.
//
// A history entry is a provider.Turn:
//
//	{"message":"..","calls":[{"tool":"..","args":{..},"result":{..}} or
//	 {"tool":"..","args":{..},"error":".."}],"response":".."}
//
// Program to daemon:
//
//	{"type":"call","id":<any JSON value>,"tool":"<name>","args":{...}}
//	{"type":"done","response":"<text>"}
//	{"type":"error","message":"<text>"}
//
// A call runs through TurnIO.Tools and is answered with a result line that
// echoes its id verbatim. A result map holding "error" becomes an error
// line with that text; a Go error from the tool caller becomes an error line
// with the error's text, except an error wrapping provider.ErrRunSuspended:
// then the process is killed (its state is mid-call) and Send returns that
// error. A call line without a tool name or whose args are not an object is
// answered with an error line (id null when it had none) and not executed.
// Every executed call (tool, args, result or error) is recorded in the turn.
//
// "done" ends the turn: the response is emitted as a single chunk through
// TurnIO.OnChunk and returned, and the turn (message, calls, response) is
// appended to the session's history. "error" fails the turn with a permanent
// provider error "scripted agent error: <text>" (the process stays; the
// failed turn is not recorded). Lines that are not JSON objects or that have
// an unknown "type" are ignored: the first Options.NoiseLogged (5) of a turn
// are logged (truncated), the rest counted and reported in one line when the
// turn ends, and past Options.MaxNoiseLines (1000) or MaxNoiseBytes (1 MiB)
// in one turn the noise is a protocol error: the process is killed and the
// turn fails with a permanent error wrapping ErrNoise. So a program should
// log to stderr, and must flush stdout after every line. A program must
// write nothing between turns: such output is read as part of the next turn.
//
// # Failures
//
//   - End of stdout mid-turn (the program exited or crashed): the process is
//     reaped and Send returns an error "scripted agent exited unexpectedly
//     (exit status N): <last stderr lines>" wrapping ErrExited. It is
//     permanent when the program exited on its own with a non-zero status
//     (the script's own error, e.g. an uncaught Python exception), transient
//     when it was killed by a signal (OOM, kill -9) or exited 0. The next
//     Send spawns a fresh process and passes the history.
//   - A ".py" script with no Python interpreter (Options.Python, default
//     python3) on PATH: CheckModel and Send fail at once with ErrNoPython.
//   - Turn timeout (Options.TurnTimeout; the time the daemon spends running
//     the program's tool calls does not count): the whole process group is
//     killed and reaped; transient error wrapping ErrTurnTimeout. The next
//     turn starts fresh with the history (never on a process in an unknown
//     protocol state).
//   - ctx cancelled: the process group is killed and reaped; the error wraps
//     ctx.Err().
//   - A line longer than Options.MaxLine (default 16 MiB): the process is
//     killed; permanent error wrapping ErrLineTooLong. Memory per line is
//     bounded by MaxLine.
//   - A process that exited between turns is replaced silently on the next
//     Send (with the history). One that ends a turn (done or error) before
//     reading its whole turn line is replaced after the turn, since its
//     stdin holds a partial line.
//
// The turn line is written while the program's output is read, so a
// program may write before it reads without deadlocking on a long history.
//
// stderr is kept in a bounded ring (the last 8 KiB) for these messages,
// and copied, on every turn, to the Launch's Stderr writer when the daemon
// gives one (its per-agent <home>/agents/<id>/stderr.log).
// Every process is waited for; none is left a zombie.
//
// # State
//
// History starts as Spec.History and grows by every completed turn. Suspend
// returns {"script":"<path>","turns":N}, never the history, and stops
// nothing (the caller stops the session afterwards). The provider declares
// HistoryOnRestore: Restore takes the script from the blob (else the
// handle, else Spec.Model) and the history from Spec.History (the daemon
// rebuilds it from the event log, the source of truth), or from the
// "history" of a blob written by an older version when Spec.History is
// empty. A
// nil or empty blob is not an error: a session that was never evicted
// restores from its handle and Spec.History. Nothing process-specific (socket,
// agent id) is stored in the blob; the environment always comes from the
// Spec, so a restored session keeps its daemon connection.
//
// Stop closes stdin, waits up to Options.StopGrace for the program to exit,
// then kills the process group and reaps it.
//
// # Python helper
//
// python/warren_script.py (and its alias python/substrat_script.py, for
// scripts written for Substrat) is a standard-library-only helper with
// read_turn(), call_tool(name, **args), done(response) and error(message)
// that handles the history replay, agent() (the "agent" object) and
// context() (the "context" list, [] in replay mode), plus rpc(method,
// **params) and
// call_tool_socket(name, **args), which call the daemon's socket with the
// process's credential (call_tool_socket is replayed like call_tool).
// WriteHelpers installs both files in a directory, for a PYTHONPATH entry in
// Spec.Env.
package scripted
