"""Helper library for warren's scripted provider (standard library only).

A scripted agent is a long-lived program that talks JSON lines with the
warren daemon on stdin/stdout (see provider/scripted/doc.go for the
protocol). This module hides the protocol and the history replay:

    from warren_script import read_turn, call_tool, done

    while True:
        message = read_turn()
        result = call_tool("send_message", to="lead", text=message)
        done("sent")

read_turn() returns the next turn's message. When the daemon starts a fresh
process for a session that already completed turns (after a timeout, a crash,
an eviction or a daemon restart), the first turn it writes carries that
history; read_turn() then first returns each historical message in order,
call_tool() returns the recorded results (raising RuntimeError for recorded
errors and AssertionError when the script calls a different tool than the
one recorded), and done()/error() just advance. Once the history is
exhausted read_turn() returns the live message and I/O becomes real, so a
deterministic script rebuilds its state by running its own code again.

Context mode (the agent's metadata "history" or the provider entry's
"history" setting is "context"): the history is not replayed. A fresh
process's first turn carries it as data instead, read with context() (a list
of {"message", "calls", "response"} dicts, oldest first; [] when there is
none), and read_turn() returns the live message at once. Use it for a bot
whose code changes, or that asks an LLM: a replay asserts the same tool
sequence, and a different one would fail every later fresh process.

agent() returns who the agent is, from the first turn of the process:
{"id", "name", "path", "parent", "parent_id", "instructions"} (parent and
parent_id are None for a root agent, which reports to USER); None before the
first read_turn().

Call ids are a per-process counter starting at 1. EOF on stdin raises
SystemExit (the daemon closed the session). A result whose id does not match
the outstanding call raises ValueError.

The API is compatible with Substrat's substrat_script module.
"""

import json
import sys

__all__ = ["Script", "read_turn", "call_tool", "call_tool_socket", "done", "error", "replaying", "rpc", "RpcError",
           "agent", "context"]


class Script(object):
    """One protocol endpoint. The module-level functions use a default
    instance on sys.stdin/sys.stdout; tests may build their own."""

    def __init__(self, stdin=None, stdout=None):
        self._in = stdin
        self._out = stdout
        self._next_id = 1
        self._replay = []  # historical turns not yet handed out
        self._live = None  # the live message buffered while replaying
        self._has_live = False
        self._current = None  # the historical turn being replayed
        self._calls = []  # its recorded calls not yet consumed
        self.agent = None  # who the agent is (the process's first turn)
        self.context = []  # the history as data (context mode)

    def _stdin(self):
        if self._in is not None:
            return self._in
        # Bytes, decoded by json as UTF-8 whatever the locale says.
        return getattr(sys.stdin, "buffer", sys.stdin)

    def _stdout(self):
        return self._out if self._out is not None else sys.stdout

    def _read(self):
        line = self._stdin().readline()
        if not line:
            raise SystemExit(0)
        msg = json.loads(line)
        if not isinstance(msg, dict):
            raise ValueError("warren_script: expected a JSON object, got %r" % (msg,))
        return msg

    def _write(self, obj):
        out = self._stdout()
        out.write(json.dumps(obj) + "\n")
        out.flush()

    def replaying(self):
        """True while the current turn is a historical one being replayed."""
        return self._current is not None

    def read_turn(self):
        """Return the next turn's message (historical ones first)."""
        self._current = None
        self._calls = []
        if self._replay:
            turn = self._replay.pop(0)
            self._current = turn
            self._calls = list(turn.get("calls") or [])
            return turn.get("message", "")
        if self._has_live:
            msg, self._live, self._has_live = self._live, None, False
            return msg
        msg = self._read()
        if msg.get("type") != "turn":
            raise ValueError("warren_script: expected a turn line, got %r" % (msg,))
        if isinstance(msg.get("agent"), dict):
            self.agent = msg["agent"]
        if isinstance(msg.get("context"), list):
            self.context = msg["context"]
        history = msg.get("history") or []
        if history:
            self._replay = list(history)
            self._live, self._has_live = msg.get("message", ""), True
            return self.read_turn()
        return msg.get("message", "")

    def _replayed(self, tool):
        """The recorded result of the next call of a historical turn."""
        if not self._calls:
            raise AssertionError(
                "warren_script replay: the script called %r but the recorded turn has no more calls. %s" % (tool, _REPLAY_HINT))
        rec = self._calls.pop(0)
        if rec.get("tool") != tool:
            raise AssertionError(
                "warren_script replay: recorded call is %r, the script called %r. %s" % (rec.get("tool"), tool, _REPLAY_HINT))
        if rec.get("error"):
            raise RuntimeError(rec["error"])
        return rec.get("result") or {}

    def call_tool(self, _tool, /, **args):
        """Call an agent tool and return its result (a dict). Raises
        RuntimeError when the tool reports an error. The tool name is
        positional-only, so a tool argument may be called "name"
        (call_tool("spawn_agent", name="worker", instructions="..."))."""
        if self._current is not None:
            return self._replayed(_tool)
        call_id = self._next_id
        self._next_id += 1
        self._write({"type": "call", "id": call_id, "tool": _tool, "args": args})
        msg = self._read()
        if msg.get("type") != "result" or msg.get("id") != call_id:
            raise ValueError("warren_script: expected the result of call %r, got %r" % (call_id, msg))
        if "error" in msg:
            raise RuntimeError(msg["error"])
        return msg.get("data") or {}

    def call_tool_socket(self, _tool, /, **args):
        """Like call_tool, over the daemon's socket with this process's
        credential (for another thread or a helper process of the script).
        The call is a call of the agent's running turn: logged with it,
        replayed like call_tool. Outside a turn it raises RpcError."""
        if self._current is not None:
            return self._replayed(_tool)
        res = rpc("tool.call", tool=_tool, arguments=args)
        if isinstance(res, dict) and res.get("error"):
            raise RuntimeError(res["error"])
        return res or {}

    def done(self, response=""):
        """Finish the turn with a response."""
        if self._current is not None:
            self._current = None
            return
        self._write({"type": "done", "response": str(response)})

    def error(self, message):
        """Fail the turn with an error message."""
        if self._current is not None:
            self._current = None
            return
        self._write({"type": "error", "message": str(message)})


# What a replay that diverges says to do: the script changed since its
# history was recorded.
_REPLAY_HINT = ("The script no longer does what its recorded turns did (was it edited?). "
                "Start the agent's history afresh with `warren agent reset AGENT`, or have its "
                "history given as context instead of replayed: `warren agent create ... --metadata "
                "history=context`, or \"history\": \"context\" on the provider entry in config.json.")


class RpcError(Exception):
    """An error answer of the daemon: .code (SPEC 8.1) and .message."""

    def __init__(self, code, message):
        Exception.__init__(self, "warren error %s: %s" % (code, message))
        self.code = code
        self.message = message


def rpc(method, **params):
    """Call a daemon method over $WARREN_SOCKET (newline JSON framing) with
    this process's agent credential ($WARREN_AGENT_CREDENTIAL), so the
    request is done as this agent: only tool.call is served, as a call of
    the agent's running turn. Returns the result; raises RpcError."""
    import os
    import socket
    cred = os.environ.get("WARREN_AGENT_CREDENTIAL")
    if cred:
        params["credential"] = cred
    req = json.dumps({"id": 1, "method": method, "params": params}).encode("utf-8") + b"\n"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(os.environ["WARREN_SOCKET"])
        s.sendall(req)
        s.shutdown(socket.SHUT_WR)
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    finally:
        s.close()
    resp = json.loads(buf)
    if resp.get("error"):
        raise RpcError(resp["error"].get("code"), resp["error"].get("message"))
    return resp.get("result")


_default = Script()


def read_turn():
    return _default.read_turn()


def call_tool(_tool, /, **args):
    return _default.call_tool(_tool, **args)


def call_tool_socket(_tool, /, **args):
    return _default.call_tool_socket(_tool, **args)


def done(response=""):
    return _default.done(response)


def error(message):
    return _default.error(message)


def replaying():
    return _default.replaying()


def agent():
    """Who the agent is (see the module documentation); None before the
    first read_turn()."""
    return _default.agent


def context():
    """The completed turns given as data in context mode ([] otherwise)."""
    return _default.context
