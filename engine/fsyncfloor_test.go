package engine

import (
	"context"
	"testing"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/store"
	"github.com/warren-dev/warren/store/local"
)

// withDaemonStore runs the harness on the store the daemon opens.
func withDaemonStore(h *harness) {
	h.store = func(fsys faultfs.FS) store.Store { return daemonStore(fsys, "/home") }
}

// daemonStore is the store the daemon opens (daemon.openLocalStore; the
// engine cannot import daemon): the home's logs sharing their fsyncs
// through a Syncer.
func daemonStore(fsys faultfs.FS, home string) store.Store {
	return local.New(local.Options{FS: fsys, Home: home, Files: eventlog.NewFiles(4096), Syncer: eventlog.NewSyncer(fsys)})
}

// flushes counts the device flushes (fsync of a file or a directory, and
// syncfs) among ops.
func flushes(ops []faultfs.Op) int {
	n := 0
	for _, o := range ops {
		switch o.Kind {
		case faultfs.OpSync, faultfs.OpSyncDir, faultfs.OpSyncFS:
			n++
		}
	}
	return n
}

// TestFsyncsPerOperation counts the flushes each operation makes on the
// daemon's store, from the filesystem's own trace, and holds each to its
// floor (the table in the README and docs/ENGINEERING.md, "Fsyncs per
// operation", gives the reason for each):
//
//   - create: 2, the new log's first group: one syncfs for the pending
//     file and every new directory entry (the log file, the agent's
//     directory), then the log's fsync;
//   - a turn: 4, two groups (turn.start, turn.complete) of two fsyncs each
//     (SPEC 3: the pending file, then the log);
//   - spawn (outside a turn): 4, the child's create, then the parent's
//     tool.call;
//   - send_message: 2 to 4, the recipient's message.enqueued and the
//     caller's tool.call, written at the same moment, so usually one shared
//     flush each for the two pending files and the two logs;
//   - terminate: 2, one group.
func TestFsyncsPerOperation(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.noWake = true }, withDaemonStore)
	h.create("warm", "", "echo")
	measure := func(what string, lo, hi int, op func()) {
		t.Helper()
		before := len(h.fs.Ops())
		op()
		ops := h.fs.Ops()[before:]
		if n := flushes(ops); n < lo || n > hi {
			t.Errorf("%s made %d flushes, want %d-%d: %v", what, n, lo, hi, ops)
		}
	}
	var root, kid string
	measure("create", 2, 2, func() { root = h.create("root", "", "echo") })
	measure("turn", 4, 4, func() { h.send(root, "hello") })
	measure("spawn", 4, 4, func() {
		r := h.tool(root, "spawn_agent", map[string]any{"name": "kid", "instructions": "x"})
		kid, _ = r["agent_id"].(string)
	})
	measure("send_message", 2, 4, func() { h.tool(root, "send_message", map[string]any{"recipient": "kid", "text": "x"}) })
	measure("terminate", 2, 2, func() {
		if err := h.c.Terminate(context.Background(), kid); err != nil {
			t.Fatal(err)
		}
	})
}

// TestCreateCrashAtEveryOpOnTheDaemonStore cuts power at every mutating
// operation of a create on the daemon's store (its syncs deferred to the
// first group's syncfs) and checks SPEC 11.3 after recovery: an
// acknowledged create exists, an unacknowledged one is complete or absent,
// and the agent created before it is untouched.
func TestCreateCrashAtEveryOpOnTheDaemonStore(t *testing.T) {
	total := 0
	{
		h := newHarness(t, func(h *harness) { h.noWake = true }, withDaemonStore)
		h.create("first", "", "echo")
		before := h.fs.MutatingOps()
		h.create("second", "", "echo")
		total = h.fs.MutatingOps() - before
	}
	for k := 1; k <= total+1; k++ {
		for _, tail := range []faultfs.TailMode{faultfs.TailNone, faultfs.TailGarbage} {
			h := newHarness(t, func(h *harness) { h.noWake = true }, withDaemonStore)
			first := h.create("first", "", "echo")
			h.fs.CrashAt(k)
			id, err := h.c.CreateAgent(context.Background(), CreateSpec{Name: "second", Provider: "inproc", Model: "echo"})
			h.fs.Crash()
			h.c.Abandon()
			h.fs.Reboot(faultfs.RebootOptions{Mode: faultfs.PowerLoss, Tail: tail})
			h.start()
			if st, ok := h.c.Status(first); !ok || st == "corrupt" {
				t.Fatalf("k=%d: the first agent after the crash: %q, %v", k, st, ok)
			}
			names := map[string]string{}
			for _, v := range h.c.List() {
				names[v.Name] = v.Status
			}
			st, found := names["second"]
			switch {
			case err == nil && !found:
				t.Fatalf("k=%d: create acknowledged (%s) but the agent is gone after power loss", k, id)
			case found && st == "corrupt":
				t.Fatalf("k=%d: the second agent came back corrupt", k)
			}
			if found {
				h.send(h.idOf("second"), "still works")
			}
		}
	}
}

// idOf is the id of the agent named name.
func (h *harness) idOf(name string) string {
	h.t.Helper()
	for _, v := range h.c.List() {
		if v.Name == name {
			return v.ID
		}
	}
	h.t.Fatalf("no agent named %s", name)
	return ""
}
