# Child of the failover test: reports to its parent, then, on the first
# daemon (WARREN_FAILOVER_HOLD set), stays mid-turn until that daemon is
# killed.
import os, sys, time
sys.path.insert(0, os.environ["WARREN_TEST_HELPER"])
from warren_script import read_turn, call_tool, done, agent

while True:
    msg = read_turn()
    if msg.startswith("You have been spawned"):
        call_tool("send_message", recipient="root", text="up " + agent()["name"])
    if os.environ.get("WARREN_FAILOVER_HOLD"):
        time.sleep(600)
    done("child read: " + msg)
