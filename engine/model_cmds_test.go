package engine

import (
	"fmt"
	"strings"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/commands"
)

// mOp is a command kind of the model test.
type mOp int

const (
	opMCreateRoot     mOp = iota // CreateAgent without a parent
	opMSpawnTurn                 // a turn whose program calls spawn_agent (deferred spawn)
	opMSpawnTool                 // spawn_agent called outside a turn (immediate spawn)
	opMTurn                      // a plain turn (Send), which consumes no message
	opMSend                      // send_message
	opMBroadcast                 // broadcast
	opMCheckInbox                // check_inbox
	opMTerminate                 // Terminate (leaves only)
	opMGate                      // gate, called by the parent
	opMUngate                    // ungate, called by the parent
	opMRestart                   // clean restart of the core on the same files
	opMCrash                     // kill -9 (and, for "power", a power loss) and recovery
	opMSendInTurn                // a turn whose program calls send_message
	opMSendDuringTurn            // send_message to an agent while it runs a turn
	opMPoke                      // poke, called by the parent
	opMComplete                  // a turn whose program calls complete
	opMPermit                    // permit_turn, called by the parent
)

var mOpNames = [...]string{"CreateRoot", "SpawnTurn", "SpawnTool", "Turn", "Send", "Broadcast", "CheckInbox",
	"Terminate", "Gate", "Ungate", "Restart", "Crash", "SendInTurn", "SendDuringTurn", "Poke", "Complete", "Permit"}

// mOpWeights are the relative frequencies of the commands.
var mOpWeights = []int{2, 6, 2, 2, 5, 3, 4, 2, 5, 1, 1, 1, 3, 2, 1, 1, 1}

// mCmd is one command: an operation, the acting agent (by path), a name
// argument and a message text.
type mCmd struct {
	op    mOp
	path  string // the agent acting (or terminated); empty for CreateRoot and Restart
	name  string // root or child name, recipient, gated child, or crash mode
	name2 string // a second child spawned in the same turn (SpawnTurn), or ""
	busy  string // the recipient's path (SendDuringTurn): it runs a turn meanwhile
	mode  string // for scripted turns: "", "fail" or "flaky"
	text  string
}

func (c *mCmd) String() string {
	switch c.op {
	case opMCreateRoot:
		return fmt.Sprintf("CreateRoot(%s)", c.name)
	case opMSpawnTurn:
		return fmt.Sprintf("SpawnTurn%s(%s, %s)", c.modeTag(), c.path, strings.TrimSpace(c.name+" "+c.name2))
	case opMTurn:
		return fmt.Sprintf("Turn%s(%s)", c.modeTag(), c.path)
	case opMComplete:
		return fmt.Sprintf("Complete%s(%s, %q)", c.modeTag(), c.path, c.text)
	case opMSpawnTool, opMGate, opMUngate, opMPoke, opMPermit:
		return fmt.Sprintf("%s(%s, %s)", mOpNames[c.op], c.path, c.name)
	case opMSend, opMSendInTurn:
		return fmt.Sprintf("%s%s(%s -> %s, %q)", mOpNames[c.op], c.modeTag(), c.path, c.name, c.text)
	case opMSendDuringTurn:
		return fmt.Sprintf("SendDuringTurn(%s -> %s (%s, busy), %q)", c.path, c.name, c.busy, c.text)
	case opMBroadcast:
		return fmt.Sprintf("Broadcast(%s, %q)", c.path, c.text)
	case opMRestart:
		return "Restart"
	case opMCrash:
		return fmt.Sprintf("Crash(%s)", c.name)
	}
	return fmt.Sprintf("%s(%s)", mOpNames[c.op], c.path)
}

func (c *mCmd) modeTag() string {
	if c.mode == "" {
		return ""
	}
	return "[" + c.mode + "]"
}

// genModelCmd builds a command for state s from four random numbers. The
// choices lean towards commands that do something (an existing child to
// gate, a gated agent to message, an agent with siblings to broadcast from)
// while still producing the refusals the rules predict.
func genModelCmd(s *mState, r []int) commands.Command {
	r = append([]int(nil), r...)
	total := 0
	for _, w := range mOpWeights {
		total += w
	}
	pick, op := r[0]%total, mOp(0)
	for i, w := range mOpWeights {
		if pick < w {
			op = mOp(i)
			break
		}
		pick -= w
	}
	text := fmt.Sprintf("m%d", s.seq)
	if c := leanCmd(s, r, text); c != nil {
		return c
	}
	anyGated, anyPending := false, false
	for _, a := range s.agents {
		anyGated = anyGated || a.gated
		anyPending = anyPending || len(a.pending) > 0
	}
	// When inboxes hold messages, or gates could hold some, lean further
	// towards check_inbox and towards messages to gated agents.
	switch {
	case anyPending && r[3]%6 == 1:
		op = opMCheckInbox
	case anyGated && r[3]%6 == 5:
		op, r[3] = opMSend, 4 // genSend: a pair whose recipient is gated
	}
	c := &mCmd{op: op, text: text}
	switch op {
	case opMSpawnTurn, opMSendInTurn, opMTurn, opMComplete:
		switch (r[0] / 64) % 6 {
		case 0:
			c.mode = "fail"
		case 1:
			c.mode = "flaky"
		}
	}
	if len(s.agents) == 0 && op != opMRestart && op != opMCrash {
		c.op, c.mode = opMCreateRoot, ""
	}
	if len(s.agents) > 0 {
		c.path = s.agents[r[1]%len(s.agents)].path
	}
	pickTargets(s, c, r)
	return c
}

// pickTargets chooses the command's agent and name arguments: three times
// in four (biased) a target that makes the command do something, otherwise
// random agents and pool names, which the rules often refuse.
func pickTargets(s *mState, c *mCmd, r []int) {
	name := mNames[r[2]%len(mNames)]
	biased := r[3]%4 != 0
	switch c.op {
	case opMCreateRoot:
		c.path, c.name = "", name
	case opMRestart:
		c.path = ""
	case opMCrash:
		// Every command ended with its effects durable, so neither a
		// process crash nor a power loss may lose any of them.
		c.path, c.name = "", "process"
		if r[2]%2 == 0 {
			c.name = "power"
		}
	case opMSpawnTurn, opMSpawnTool:
		c.name = name
		if biased {
			genSpawn(s, c, r)
		}
		if c.op == opMSpawnTurn && r[3]%3 == 0 {
			// Two children in one turn; the same name twice is refused.
			c.name2 = mNames[(r[2]/7)%len(mNames)]
		}
	case opMSend, opMSendInTurn:
		genSend(s, c, r)
	case opMSendDuringTurn:
		type pair struct{ from, to int }
		var pairs []pair
		for i := range s.agents {
			for j := range s.agents {
				if j != i && s.lookup(j, s.agents[i].name) == i {
					pairs = append(pairs, pair{j, i})
				}
			}
		}
		if len(pairs) == 0 {
			c.op = opMSend
			genSend(s, c, r)
			break
		}
		p := pairs[r[2]%len(pairs)]
		c.path, c.name, c.busy = s.agents[p.from].path, s.agents[p.to].name, s.agents[p.to].path
	case opMBroadcast:
		var withSiblings []string
		for i, a := range s.agents {
			if len(s.siblings(i)) > 0 {
				withSiblings = append(withSiblings, a.path)
			}
		}
		if biased && len(withSiblings) > 0 {
			c.path = withSiblings[r[2]%len(withSiblings)]
		}
	case opMCheckInbox:
		var waiting []string
		for _, a := range s.agents {
			if len(a.pending) > 0 {
				waiting = append(waiting, a.path)
			}
		}
		if biased && len(waiting) > 0 {
			c.path = waiting[r[2]%len(waiting)]
		}
	case opMTerminate, opMComplete:
		var leaves []string
		for _, a := range s.agents {
			if len(s.children(a.path)) == 0 {
				leaves = append(leaves, a.path)
			}
		}
		if biased && len(leaves) > 0 {
			c.path = leaves[r[2]%len(leaves)]
		}
	case opMPoke:
		// Mostly a held child, else any child, else any pool name.
		var held, kids []int
		for i, a := range s.agents {
			if a.parent != "" {
				kids = append(kids, i)
				if a.held {
					held = append(held, i)
				}
			}
		}
		if len(held) == 0 {
			held = kids
		}
		if biased && len(held) > 0 {
			k := held[r[2]%len(held)]
			c.path, c.name = s.agents[k].parent, s.agents[k].name
		} else {
			c.name = name
		}
	case opMGate, opMUngate, opMPermit:
		// A child whose gate the command changes (for permit_turn: a gated
		// one), else any child, else any pool name (refused unless it names
		// a child).
		var changes, any []int
		for i, a := range s.agents {
			if a.parent == "" {
				continue
			}
			any = append(any, i)
			if a.gated != (c.op == opMGate) {
				changes = append(changes, i)
			}
		}
		switch {
		case biased && len(changes) > 0:
			k := changes[r[2]%len(changes)]
			c.path, c.name = s.agents[k].parent, s.agents[k].name
		case biased && len(any) > 0:
			k := any[r[2]%len(any)]
			c.path, c.name = s.agents[k].parent, s.agents[k].name
		default:
			c.name = name
		}
	}
}

// leanCmd makes gated agents with waiting messages fail turns or get a
// permit_turn, and ungates held agents (a hold must keep the wake an ungate would start), often
// enough for these rare states to be reached; nil when it picks nothing.
func leanCmd(s *mState, r []int, text string) *mCmd {
	var gatedWaiting, heldGated []int
	for i, a := range s.agents {
		if a.gated && len(a.pending) > 0 {
			gatedWaiting = append(gatedWaiting, i)
		}
		if a.gated && a.held {
			heldGated = append(heldGated, i)
		}
	}
	switch {
	case len(heldGated) > 0 && r[1]%3 == 0:
		k := heldGated[r[2]%len(heldGated)]
		return &mCmd{op: opMUngate, path: s.agents[k].parent, name: s.agents[k].name, text: text}
	case len(gatedWaiting) > 0 && r[1]%4 == 1:
		k := gatedWaiting[r[2]%len(gatedWaiting)]
		return &mCmd{op: opMTurn, mode: "fail", path: s.agents[k].path, text: text}
	case len(gatedWaiting) > 0 && r[1]%4 == 2 && r[3]%2 == 0:
		k := gatedWaiting[r[2]%len(gatedWaiting)]
		return &mCmd{op: opMPermit, path: s.agents[k].parent, name: s.agents[k].name, text: text}
	}
	return nil
}

// genSpawn picks a parent and a free name, preferring parents that already
// have a child, so that siblings (and broadcasts) are common.
func genSpawn(s *mState, c *mCmd, r []int) {
	type pair struct{ parent, name string }
	var withKids, others []pair
	for _, a := range s.agents {
		for _, n := range mNames {
			if n == a.name || s.childNamed(a.path, n) >= 0 {
				continue
			}
			if len(s.children(a.path)) > 0 {
				withKids = append(withKids, pair{a.path, n})
			} else {
				others = append(others, pair{a.path, n})
			}
		}
	}
	if len(withKids) == 0 || (r[3]%3 == 0 && len(others) > 0) {
		withKids = others
	}
	if len(withKids) > 0 {
		p := withKids[r[2]%len(withKids)]
		c.path, c.name = p.parent, p.name
	}
}

// genSend picks a sender and a recipient name: half the time a pair where
// the recipient is gated (its inbox keeps the message), else mostly a name
// the sender can reach, and one time in eight any pool name or USER (often
// refused by the routing rules).
func genSend(s *mState, c *mCmd, r []int) {
	type pair struct{ from, to string }
	var gated []pair
	for i, a := range s.agents {
		if !a.gated {
			continue
		}
		for j := range s.agents {
			if j != i && s.lookup(j, a.name) == i {
				gated = append(gated, pair{s.agents[j].path, a.name})
			}
		}
	}
	mode := r[3] % 8
	if mode >= 4 && len(gated) > 0 {
		p := gated[r[2]%len(gated)]
		c.path, c.name = p.from, p.to
		return
	}
	i := s.find(c.path)
	var cands []string
	if mode == 0 {
		cands = append([]string{"USER"}, mNames...)
	} else {
		if s.agents[i].parent == "" {
			cands = append(cands, "USER")
		} else {
			cands = append(cands, s.agents[s.find(s.agents[i].parent)].name)
		}
		for _, j := range append(s.children(c.path), s.siblings(i)...) {
			cands = append(cands, s.agents[j].name)
		}
	}
	c.name = cands[r[2]%len(cands)]
}

// PreCondition: the acting agent exists (a shrunk sequence may have lost
// the command that created it).
func (c *mCmd) PreCondition(st commands.State) bool {
	s := st.(*mState)
	switch c.op {
	case opMCreateRoot, opMRestart, opMCrash:
		return true
	case opMSendDuringTurn:
		i := s.find(c.path)
		return i >= 0 && s.find(c.busy) >= 0 && s.lookup(i, c.name) == s.find(c.busy)
	}
	return s.find(c.path) >= 0
}

// NextState applies the command to a copy of the model and records the
// outcome the command must have had.
func (c *mCmd) NextState(st commands.State) commands.State {
	s := st.(*mState).clone()
	s.seq++
	i := s.find(c.path)
	switch c.op {
	case opMSpawnTool, opMSend, opMSendInTurn, opMSendDuringTurn, opMBroadcast, opMCheckInbox, opMGate, opMUngate, opMPoke, opMPermit:
		s.agents[i].calls++ // every tool call is logged in the caller's log
	}
	switch c.op {
	case opMCreateRoot:
		if s.find(c.name) >= 0 {
			s.expect = mOutcome{err: "another root already has that name"}
			break
		}
		s.add("", c.name)
	case opMSpawnTurn:
		// The children are created after the turn (also a failed one), in
		// call order; each runs its bootstrap turn, which consumes nothing.
		s.expect = mOutcome{calls: []string{}}
		for _, n := range strings.Fields(c.name + " " + c.name2) {
			s.agents[i].calls++
			if n == s.agents[i].name || s.childNamed(c.path, n) >= 0 {
				s.expect.calls = append(s.expect.calls, "error: agent name taken")
				continue
			}
			s.expect.calls = append(s.expect.calls, "accepted")
			s.add(c.path, n)
			s.agents[len(s.agents)-1].turns = 1
		}
		s.scriptedTurnEnded(i, c.mode)
	case opMSpawnTool:
		if c.name == s.agents[i].name || s.childNamed(c.path, c.name) >= 0 {
			s.expect = mOutcome{err: "agent name taken"}
			break
		}
		s.add(c.path, c.name)
		s.agents[len(s.agents)-1].turns = 1 // its bootstrap turn
	case opMTurn:
		s.scriptedTurnEnded(i, c.mode)
	case opMComplete:
		// complete sends the result to the parent as a response during the
		// turn; the agent is terminated when the turn ends, even a failed
		// one (and then no failure notice is sent).
		s.agents[i].calls++
		switch {
		case s.agents[i].parent == "":
			s.expect = mOutcome{calls: []string{"error: root agent cannot complete"}}
		case len(s.children(c.path)) > 0:
			s.expect = mOutcome{calls: []string{"error: agent has children"}}
		default:
			s.expect = mOutcome{calls: []string{"completing"}}
			s.deliver(s.find(s.agents[i].parent), c.text)
			if c.mode == "fail" {
				s.expect.err = "scripted failure"
			}
			s.agents = append(s.agents[:i], s.agents[i+1:]...)
			return s
		}
		s.scriptedTurnEnded(i, c.mode)
	case opMSend:
		s.expect = mOutcome{err: s.send(i, c.name, c.text)}
	case opMSendInTurn:
		res := "sent"
		if e := s.send(i, c.name, c.text); e != "" {
			res = "error: " + e
		}
		s.expect = mOutcome{calls: []string{res}}
		s.scriptedTurnEnded(i, c.mode)
	case opMSendDuringTurn:
		// The message arrives during the recipient's turn, so that turn
		// does not consume it: a wake turn after it does (or a gate keeps it).
		j := s.find(c.busy)
		s.agents[j].pending = append(s.agents[j].pending, c.text)
		s.agents[j].held = false
		s.turnEnded(j, false)
	case opMBroadcast:
		sibs := s.siblings(i)
		if len(sibs) == 0 {
			s.expect = mOutcome{err: "broadcast needs siblings"}
			break
		}
		for _, j := range sibs {
			s.deliver(j, c.text)
		}
		s.expect = mOutcome{count: len(sibs)}
	case opMCheckInbox:
		s.expect = mOutcome{texts: s.agents[i].pending}
		s.agents[i].pending = nil
	case opMTerminate:
		if len(s.children(c.path)) > 0 {
			s.expect = mOutcome{err: "child"} // "has 1 child; terminate it first", "has 2 children; ..."
			break
		}
		s.agents = append(s.agents[:i], s.agents[i+1:]...)
	case opMRestart, opMCrash:
		// A hold is the state of one process: the new one wakes every agent
		// with pending messages that is not gated.
		for j := range s.agents {
			s.agents[j].held, s.agents[j].permit = false, false
			s.wake(j)
		}
	case opMGate, opMUngate, opMPoke, opMPermit:
		j := s.childNamed(c.path, c.name)
		if j < 0 {
			s.expect = mOutcome{err: "no child agent named"}
			break
		}
		switch c.op {
		case opMGate:
			s.agents[j].gated, s.agents[j].permit = true, false
		case opMUngate:
			s.agents[j].gated, s.agents[j].permit = false, false
		case opMPermit:
			if !s.agents[j].gated {
				s.expect = mOutcome{err: "agent is not gated"}
				break
			}
			s.agents[j].permit = true // one wake turn despite the gate
		default:
			s.agents[j].held = false
		}
		s.wake(j)
	}
	return s
}

// scriptedTurnEnded applies the end of a scripted turn run in mode.
func (s *mState) scriptedTurnEnded(i int, mode string) {
	switch mode {
	case "fail":
		s.expect.err = "scripted failure"
		s.turnEnded(i, true)
	case "flaky":
		s.agents[i].retries++
		s.turnEnded(i, false)
	default:
		s.turnEnded(i, false)
	}
}

// PostCondition compares the outcome and the mObservation with the model.
func (c *mCmd) PostCondition(st commands.State, result commands.Result) *gopter.PropResult {
	s := st.(*mState)
	res := result.(mResult)
	var bad []string
	if d := mCompareOutcome(s.expect, res.out); d != "" {
		bad = append(bad, d)
	}
	bad = append(bad, mCompareObservation(s, res.obs)...)
	if len(bad) == 0 {
		return &gopter.PropResult{Status: gopter.PropTrue}
	}
	return gopter.NewPropResult(false, fmt.Sprintf("after %s:\n  %s\n  model: %s", c, strings.Join(bad, "\n  "), s))
}

func mCompareOutcome(want, got mOutcome) string {
	if want.err != "" && !strings.Contains(got.err, want.err) {
		return fmt.Sprintf("outcome %s, want an error mentioning %q", got, want.err)
	}
	if want.err == "" && (got.err != "" || fmt.Sprint(got.texts) != fmt.Sprint(want.texts) || got.count != want.count) {
		return fmt.Sprintf("outcome %s, want %s", got, want)
	}
	if len(got.calls) != len(want.calls) {
		return fmt.Sprintf("tool calls in the turn returned %q, want %q", got.calls, want.calls)
	}
	for k := range want.calls {
		if !strings.HasPrefix(got.calls[k], want.calls[k]) {
			return fmt.Sprintf("tool calls in the turn returned %q, want %q", got.calls, want.calls)
		}
	}
	return ""
}
