# Root of the scripted team test. "start": spawn three workers; "kick":
# tell each to set up; "collect": tell each to finish; worker results that
# arrive are counted and, once all three are in, reported to USER.
import os, re, sys
sys.path.insert(0, os.environ["WARREN_TEST_HELPER"])
from warren_script import read_turn, call_tool, done

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker.py")
WORKERS = ("w1", "w2", "w3")
results = set()
while True:
    msg = read_turn()
    if msg == "start":
        for name in WORKERS:
            call_tool("spawn_agent", name=name, instructions="worker", model=WORKER)
        done("spawned 3")
    elif msg in ("kick", "collect"):
        for name in WORKERS:
            call_tool("send_message", recipient=name, text=msg + " " + name)
        done("sent " + msg)
    else:
        for m in re.finditer(r"worker-result (w\d)", msg):
            results.add(m.group(1))
        if len(results) == 3:
            call_tool("send_message", recipient="USER", text="all workers done: " + ",".join(sorted(results)))
        done("have %d" % len(results))
