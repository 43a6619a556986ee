# A leaf: on "go", completes with its result (a response to its parent).
import os, sys
sys.path.insert(0, os.environ["WARREN_TEST_HELPER"])
from warren_script import read_turn, call_tool, done

while True:
    msg = read_turn()
    if msg.rstrip().endswith("go"):
        call_tool("complete", result="leaf-result")
        done("completed")
    else:
        done("waiting")
