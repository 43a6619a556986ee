package engine

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider"
)

// ckptStats counts what checkCheckpointRecovery compared.
type ckptStats struct {
	mu      sync.Mutex
	checks  int // recoveries compared
	agents  int // agents compared
	resumed int // of which recovered from a checkpoint
}

func (s *ckptStats) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("%d recoveries compared, %d agents, %d recovered from a checkpoint", s.checks, s.agents, s.resumed)
}

// checkCheckpointRecovery recovers the files twice without waking anyone,
// first from the checkpoints, then folding every log from its start, and
// fails the test unless both give every agent the same state. The first
// recovery does what any recovery does to the files (torn tails, pending
// files, run.interrupted), so the second starts from the same logs.
func (h *harness) checkCheckpointRecovery(fsys faultfs.FS) {
	h.t.Helper()
	recoverOnce := func(every int) (map[string]string, RecoveryReport) {
		c, err := NewCore(context.Background(), withDefaults(CoreOptions{
			FS: fsys, Home: "/home", Providers: map[string]provider.Provider{"inproc": h.prov},
			DefaultProvider: "inproc", DefaultModel: "echo", Config: h.cfg, NoWake: true,
			Logger: hclog.NewNullLogger(), CheckpointEvery: every,
			BootID: fmt.Sprintf("ckptcheck%d", h.boots),
		}))
		if err != nil {
			h.t.Fatalf("NewCore: %v", err)
		}
		rep, err := c.Recover(context.Background())
		if err != nil {
			h.t.Fatalf("Recover (checkpoints every %d): %v", every, err)
		}
		<-c.scrubbed
		st := canonicalStates(h, c)
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // no waiting: nothing runs
		if err := c.Close(ctx); err != nil {
			h.t.Fatalf("Close: %v", err)
		}
		return st, rep
	}
	fromCkpt, rep := recoverOnce(h.ckptEvery)
	full, _ := recoverOnce(-1)
	var ids []string
	for id := range full {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	if len(fromCkpt) != len(full) {
		h.t.Fatalf("recovery from checkpoints has %d agents, a full fold %d", len(fromCkpt), len(full))
	}
	for _, id := range ids {
		if fromCkpt[id] != full[id] {
			h.t.Fatalf("agent %s recovered from its checkpoint differs from a full fold of its log:\ncheckpoint: %s\nfull fold:  %s",
				id, fromCkpt[id], full[id])
		}
	}
	if s := h.ckptStats; s != nil {
		s.mu.Lock()
		s.checks++
		s.agents += len(full)
		s.resumed += rep.Resumed
		s.mu.Unlock()
	}
}

// canonicalStates describes every agent's recovered state: its projection
// as a checkpoint encodes it, its pending messages in full, its session
// and whether it is corrupt.
func canonicalStates(h *harness, c *Core) map[string]string {
	h.t.Helper()
	out := map[string]string{}
	for _, a := range c.agentList() {
		var corrupt bool
		var st []byte
		var err error
		var msgs []string
		a.View(func(p *projection, l liveFlags) {
			if corrupt = l.Corrupt != nil; corrupt {
				return
			}
			st, err = p.EncodeState()
			for _, m := range p.Pending.Peek() {
				msgs = append(msgs, fmtAny(m))
			}
		})
		if corrupt {
			out[a.ID()] = "corrupt"
			continue
		}
		if err != nil {
			h.t.Fatalf("encoding the state of %s: %v", a.ID(), err)
		}
		out[a.ID()] = string(st) + " pending=" + strings.Join(msgs, ";")
	}
	return out
}
