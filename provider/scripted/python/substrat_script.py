"""Substrat-compatible alias of warren_script: scripts written for
Substrat's scripted provider keep working unchanged under warren."""

from warren_script import Script, call_tool, done, error, read_turn, replaying  # noqa: F401

__all__ = ["Script", "read_turn", "call_tool", "done", "error", "replaying"]
