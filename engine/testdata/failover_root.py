# Root of the failover test (failover_test.go). "start": spawn c1 and c2.
# Any other turn (the children's reports): on the first daemon
# (WARREN_FAILOVER_HOLD set) stay mid-turn until that daemon is killed; on
# the daemon that takes over, answer.
import os, sys, time
sys.path.insert(0, os.environ["WARREN_TEST_HELPER"])
from warren_script import read_turn, call_tool, done

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "failover_child.py")
while True:
    msg = read_turn()
    if msg == "start":
        for name in ("c1", "c2"):
            call_tool("spawn_agent", name=name, instructions="child", model=CHILD)
        done("spawned 2")
    elif os.environ.get("WARREN_FAILOVER_HOLD"):
        time.sleep(600)  # mid-turn: the daemon is killed meanwhile
        done("held")
    else:
        done("root read: " + msg)
