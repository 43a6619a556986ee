package engine

// The stateful model test of the agent layer (issue 4, "Proof").
//
// A gopter command sequence drives a harness (in-process provider, wakes
// enabled, every agent running mSUT.program) and a model of the tree and
// the inboxes side by side. The commands: create a root; spawn one or two
// children from inside a turn (deferred spawn) or outside one; run a turn;
// send_message from outside a turn, from inside one, and to an agent while
// it runs a turn; broadcast; check_inbox; complete from inside a turn;
// terminate (leaves only); gate, ungate, permit_turn and poke from the
// parent; a clean restart; a crash (process crash or power loss). Scripted
// turns may fail (the agent is held, its parent gets SYSTEM's notice) or
// fail once transiently (the retry answers the recorded tool calls from the
// log). Names come from a pool of four, so name rules and one-hop routing
// refuse often.
//
// Every command is followed by h.quiet(), so every agent has finished its
// turns: a message to an agent that is neither gated nor held has been
// consumed by one completed wake turn, and a message to a gated agent
// waits until check_inbox takes it or an ungate lets a wake turn consume
// it. After each command the test compares with the model: the command's
// outcome (the error the rules predict, or the exact result), the live tree
// (paths and parents, in List order, which is creation order), each agent's
// gate, hold and pending messages in order, the USER inbox, the counts of
// tool.call, turn.complete, turn.failed and turn.retry in each log, and an
// oracle computed from each agent's log alone (model_check_test.go): the
// inbox equals enqueued minus delivered minus the messages of completed
// turns, and no message is consumed twice.
//
// The quick profile runs 100 sequences of up to 25 commands from a fixed
// seed; WARREN_LONG=1 runs 2000 of up to 40 from a random seed (logged;
// WARREN_SEED replays one). Failures are shrunk to a short sequence.

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/commands"
	"github.com/leanovate/gopter/gen"
)

// mNames is the name pool: small, so that names collide among roots,
// siblings and parent/child, and references hit both right and wrong agents.
var mNames = []string{"a", "b", "c", "d"}

// mModelProgram is the inproc model every agent of the model test runs.
const mModelProgram = "modelprog"

// mAgent is one agent of the model, identified by its path.
type mAgent struct {
	path    string
	name    string
	parent  string // the parent's path; "" for a root
	gated   bool
	pending []string // payloads of the messages waiting in its inbox, in order
	held    bool     // its last turn failed: no wake until a message, a poke or a good turn
	permit  bool     // permit_turn: one wake turn despite the gate (not kept across a restart)
	calls   int      // tool calls it made (tool.call entries in its log)
	turns   int      // turns it completed (turn.complete entries in its log)
	fails   int      // turns that failed (turn.failed)
	retries int      // transient failures retried (turn.retry)
}

// mState is the model: the agents in creation order (which is also the
// order of roots and of each agent's children in the tree), the USER inbox,
// a counter for unique message texts, and the outcome the last command
// should have had.
type mState struct {
	agents []mAgent
	user   []string
	seq    int
	expect mOutcome
}

// mOutcome is what a command returned: an error text (for the model: a
// substring the error must contain), the texts check_inbox returned, the
// recipient count of a broadcast, and what the tool calls of a scripted
// turn returned (for the model: prefixes of them).
type mOutcome struct {
	err   string
	texts []string
	count int
	calls []string // per tool call made in a scripted turn: its status, or "error: <text>"
}

func (o mOutcome) String() string {
	if o.err != "" {
		return fmt.Sprintf("error %q calls=%q", o.err, o.calls)
	}
	return fmt.Sprintf("ok texts=%q count=%d calls=%q", o.texts, o.count, o.calls)
}

func (s *mState) clone() *mState {
	n := &mState{agents: make([]mAgent, len(s.agents)), user: append([]string(nil), s.user...), seq: s.seq}
	for i, a := range s.agents {
		a.pending = append([]string(nil), a.pending...)
		n.agents[i] = a
	}
	return n
}

func (s *mState) String() string {
	var b strings.Builder
	for _, i := range s.preorder() {
		a := s.agents[i]
		fmt.Fprintf(&b, "%s(gated=%v permit=%v held=%v pending=%q) ", a.path, a.gated, a.permit, a.held, a.pending)
	}
	return b.String()
}

// find returns the index of the agent at path, or -1.
func (s *mState) find(path string) int {
	for i, a := range s.agents {
		if a.path == path {
			return i
		}
	}
	return -1
}

// children returns the indexes of path's children in creation order.
func (s *mState) children(path string) []int {
	var out []int
	for i, a := range s.agents {
		if a.parent == path {
			out = append(out, i)
		}
	}
	return out
}

// siblings returns the indexes of the agents sharing i's parent (roots have
// none), in creation order.
func (s *mState) siblings(i int) []int {
	a := s.agents[i]
	if a.parent == "" {
		return nil
	}
	var out []int
	for j, b := range s.agents {
		if j != i && b.parent == a.parent {
			out = append(out, j)
		}
	}
	return out
}

// childNamed returns the index of path's child named name, or -1.
func (s *mState) childNamed(path, name string) int {
	for _, i := range s.children(path) {
		if s.agents[i].name == name {
			return i
		}
	}
	return -1
}

// preorder lists the agents depth-first from the roots, as Core.List does.
func (s *mState) preorder() []int {
	var out []int
	var walk func(parent string)
	walk = func(parent string) {
		for _, i := range s.children(parent) {
			out = append(out, i)
			walk(s.agents[i].path)
		}
	}
	walk("")
	return out
}

// lookup is tree.Lookup on the model: the parent, then the children, then
// the siblings of i named name; -1 when none.
func (s *mState) lookup(i int, name string) int {
	a := s.agents[i]
	if p := s.find(a.parent); p >= 0 && s.agents[p].name == name {
		return p
	}
	if c := s.childNamed(a.path, name); c >= 0 {
		return c
	}
	for _, j := range s.siblings(i) {
		if s.agents[j].name == name {
			return j
		}
	}
	return -1
}

// deliver puts a message into an agent's inbox. A new message lifts the
// hold of a failed turn; an agent that is not gated then consumes its whole
// inbox in one wake turn before the command is over, a gated one keeps it.
func (s *mState) deliver(i int, text string) {
	s.agents[i].pending = append(s.agents[i].pending, text)
	s.agents[i].held = false
	s.wake(i)
}

// wake runs the wake turn the daemon starts for an idle agent with pending
// messages that is not held and not gated (or holds a permit, which the
// turn uses up): it consumes them all.
func (s *mState) wake(i int) {
	a := &s.agents[i]
	if (!a.gated || a.permit) && !a.held && len(a.pending) > 0 {
		a.pending = nil
		a.turns++
		a.permit = false
	}
}

// turnEnded applies the end of a turn of agent i run by Send: a completed
// turn lifts the hold and is followed by a wake; a failed one holds the
// agent and sends SYSTEM's notice to its parent.
func (s *mState) turnEnded(i int, failed bool) {
	a := &s.agents[i]
	if !failed {
		a.turns++
		a.held = false
		s.wake(i)
		return
	}
	a.fails++
	a.held = true
	if p := s.find(a.parent); p >= 0 {
		s.deliver(p, mFailedNotice(a.name))
	}
}

// mFailedNotice is how the model writes (and the observation normalises)
// SYSTEM's notice of a failed turn of the agent named name.
func mFailedNotice(name string) string { return "FAILED:" + name }

// mNormalize turns SYSTEM's notice of a failed turn into mFailedNotice.
func mNormalize(payload string) string {
	if rest, ok := strings.CutPrefix(payload, "Agent "); ok {
		if name, _, found := strings.Cut(rest, " failed its turn"); found {
			return mFailedNotice(name)
		}
	}
	return payload
}

// send applies send_message from agent i to name: it returns the text the
// routing error must contain, or "" when the message is delivered.
func (s *mState) send(i int, name, text string) string {
	switch {
	case name == "USER" && s.agents[i].parent != "":
		return "only root agents can message USER"
	case name == "USER":
		s.user = append(s.user, text)
		return ""
	}
	j := s.lookup(i, name)
	if j < 0 {
		return "no reachable agent named"
	}
	s.deliver(j, text)
	return ""
}

// add appends a new agent (created or spawned).
func (s *mState) add(parent, name string) {
	path := name
	if parent != "" {
		path = parent + "/" + name
	}
	s.agents = append(s.agents, mAgent{path: path, name: name, parent: parent})
}

func modelSeed(t *testing.T) (seed int64, runs, size int) {
	seed, runs, size = 20261122, 100, 26 // size is exclusive: up to 25 commands
	if os.Getenv("WARREN_LONG") == "1" {
		seed, runs, size = time.Now().UnixNano(), 2000, 41
	}
	if v, err := strconv.ParseInt(os.Getenv("WARREN_SEED"), 10, 64); err == nil {
		seed = v
	}
	t.Logf("agent model seed %d (replay with WARREN_SEED=%d), %d sequences of up to %d commands", seed, seed, runs, size-1)
	return seed, runs, size
}

// TestAgentLayerAgreesWithModel runs command sequences against the agent
// layer and the model and checks, after every command, that the outcome,
// the tree, the inboxes and the logs agree with the model.
func TestAgentLayerAgreesWithModel(t *testing.T) {
	seed, runs, size := modelSeed(t)
	params := gopter.DefaultTestParametersWithSeed(seed)
	params.MinSuccessfulTests = runs
	params.MaxSize = size
	params.MaxShrinkCount = 200
	props := gopter.NewProperties(params)
	stats := &mStats{ckpt: &ckptStats{}}
	props.Property("tree, inboxes and logs agree with the model after every command", commands.Prop(modelCommands(t, stats)))
	props.TestingRun(t)
	t.Logf("commands run (ok/refused): %s; %d messages held by a gate, %d taken by check_inbox; checkpoints: %s", stats, stats.held, stats.taken, stats.ckpt)
	if stats.ckpt.resumed == 0 {
		t.Errorf("no recovery started from a checkpoint: the checkpoint equivalence check compared nothing")
	}
}

// mStats counts what the sequences exercised, to show the coverage.
type mStats struct {
	mu    sync.Mutex
	ok    [len(mOpNames)]int
	err   [len(mOpNames)]int
	taken int
	held  int
	ckpt  *ckptStats
}

func (st *mStats) record(op mOp, o mOutcome, held int) {
	st.mu.Lock()
	defer st.mu.Unlock()
	refused := o.err != ""
	for _, c := range o.calls {
		refused = refused || strings.HasPrefix(c, "error:")
	}
	if refused {
		st.err[op]++
	} else {
		st.ok[op]++
	}
	st.taken += len(o.texts)
	st.held += held
}

func (st *mStats) String() string {
	st.mu.Lock()
	defer st.mu.Unlock()
	var parts []string
	for i, n := range mOpNames {
		parts = append(parts, fmt.Sprintf("%s %d/%d", n, st.ok[i], st.err[i]))
	}
	return strings.Join(parts, ", ")
}

func modelCommands(t *testing.T, stats *mStats) *commands.ProtoCommands {
	return &commands.ProtoCommands{
		NewSystemUnderTestFunc: func(commands.State) commands.SystemUnderTest { return newModelSUT(t, stats) },
		DestroySystemUnderTestFunc: func(sut commands.SystemUnderTest) {
			sut.(*mSUT).close()
		},
		InitialStateGen: gen.Const(0).Map(func(int) *mState { return &mState{} }),
		GenCommandFunc: func(st commands.State) gopter.Gen {
			s := st.(*mState)
			return gen.SliceOfN(4, gen.IntRange(0, 1<<20)).Map(func(r []int) commands.Command {
				return genModelCmd(s, r)
			}).WithShrinker(gopter.NoShrinker)
		},
	}
}
