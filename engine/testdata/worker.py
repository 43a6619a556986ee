# A worker. "kick": spawn leaves l1 and l2. "collect": greet the siblings
# (broadcast) and tell each leaf to go. Leaf results arrive as responses;
# with both in and both siblings' hellos received, complete (after the
# leaves are gone: subscribe to their termination when they are still
# there).
import os, re, sys
sys.path.insert(0, os.environ["WARREN_TEST_HELPER"])
from warren_script import read_turn, call_tool, done

LEAF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "leaf.py")
# A sender is shown by its name, or by the path it had once it is gone (a
# leaf that completed before this turn was prompted: "root/w2/l1").
SENDER = re.compile(r"(?:Message from ([\w./-]+):\n|\d+\. From ([\w./-]+): )(.*)")
results = set()
hellos = 0
finished = False
me = None

def try_complete():
    global finished
    try:
        call_tool("complete", result="worker-result %s hellos=%d" % (me, hellos))
        finished = True
        return "completing"
    except RuntimeError as e:
        if "children" not in str(e):
            raise
        watching = 0
        for leaf in ("l1", "l2"):
            try:
                call_tool("subscribe", agent_name=leaf, transition="*->terminated", once=True)
                watching += 1
            except RuntimeError:
                pass  # already gone
        if watching == 0:
            return try_complete()
        return "waiting for the leaves to go"

while True:
    msg = read_turn()
    if msg.startswith("You have been spawned"):
        done("ready")
        continue
    out = []
    for m in SENDER.finditer(msg):
        sender = m.group(1) or m.group(2)
        text = m.group(3)
        if text.startswith("kick"):
            for leaf in ("l1", "l2"):
                call_tool("spawn_agent", name=leaf, instructions="leaf", model=LEAF)
            out.append("spawned leaves")
        elif text.startswith("collect"):
            me = text.split()[1]
            call_tool("list_children")
            call_tool("broadcast", text="hello")
            for leaf in ("l1", "l2"):
                call_tool("send_message", recipient=leaf, text="go")
            out.append("collecting")
        elif text == "hello":
            hellos += 1
        elif text.startswith("leaf-result"):
            results.add(sender)
    # Complete only once both siblings' hellos are in: a sibling that
    # completes is terminated, and a broadcast still on its way to it would
    # fail (a race of the scenario, not of the daemon).
    if len(results) == 2 and hellos == 2 and not finished and me is not None:
        out.append(try_complete())
    done("; ".join(out) or "noted")
