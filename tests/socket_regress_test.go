package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/warren-dev/warren/protocol"
)

// TestSocketSubscribeSinceSeqDuringCreates: an events.subscribe of all
// agents with since_seq, while agents are being created, does not fail
// (regression: the replay walked the tree, met an agent whose creation had
// not finished and failed the whole subscription with code 1; fixed in
// 7c707db).
func TestSocketSubscribeSinceSeqDuringCreates(t *testing.T) {
	d := startTestDaemon(t, modeInProcess)
	ctx := procCtx(t)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(stop)
		for i := 0; i < 50; i++ {
			if _, err := protocol.CallJSON(ctx, d.Sock, "agent.create", map[string]any{"name": fmt.Sprintf("c%d", i),
				"provider": "inproc", "model": "echo"}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	errSeen := errors.New("saw a live event")
	cl := d.Client()
	for {
		select {
		case <-stop:
			wg.Wait()
			return
		default:
		}
		// With a since_seq beyond every log, the replay sends nothing; the
		// first frame is a live event, which proves the replay succeeded.
		sub, cancel := context.WithCancel(ctx)
		go func() { // the creates may end while this waits for an event
			select {
			case <-stop:
			case <-sub.Done():
			}
			cancel()
		}()
		err := cl.Stream(sub, "events.subscribe", map[string]any{"since_seq": 1 << 40}, func(protocol.Frame) error { return errSeen })
		cancel()
		if err != nil && !errors.Is(err, errSeen) && !errors.Is(err, context.Canceled) {
			t.Fatalf("events.subscribe with since_seq during agent creation: %v (code %d)", err, protocol.CodeOf(err))
		}
	}
}

// TestSocketToolCallSpawnWhileBusySurvivesKill: tool.call spawn_agent on
// an agent that is in a turn, acknowledged with the child's id, survives a
// SIGKILL before the turn ends (regression: the creation was only queued
// until the turn ended and a kill lost the acknowledged child; fixed in
// 7c707db).
func TestSocketToolCallSpawnWhileBusySurvivesKill(t *testing.T) {
	d := startTestDaemon(t, modeBinary)
	script := writeScripts(t, d.dir)
	d.createAgent("boss", "scripted", script, "")
	blockScriptedTurn(t, d, "boss")
	res := d.callN("tool.call", map[string]any{"agent_id": "boss", "tool": "spawn_agent",
		"arguments": map[string]any{"name": "kid", "instructions": "k", "provider": "inproc", "model": "echo"}})
	kid, ok := res["agent_id"].(string)
	if !ok {
		t.Fatalf("spawn_agent = %v", res)
	}
	d.Kill()
	d.Start()
	if _, err := d.Client().Call(procCtx(t), "agent.inspect", map[string]any{"agent_id": kid}); err != nil {
		t.Fatalf("acknowledged spawn %s (tool.call result %v) is gone after kill -9: %v", kid, res, err)
	}
}

// TestSocketAgentLogLongLogData: agent.log of an agent whose log is longer
// than the reader's buffer returns every event's own data (regression: the
// eventlog fast path aliased the reused line buffer, so the first event
// came back with the data of a later line; fixed in fb525e8).
func TestSocketAgentLogLongLogData(t *testing.T) {
	d := startTestDaemon(t, modeInProcess)
	id := d.createAgent("long", "inproc", "echo", "")
	msg := strings.Repeat("m", 2000)
	for i := 0; i < 60; i++ {
		d.callN("agent.send", map[string]any{"agent_id": "long", "message": fmt.Sprintf("%d %s", i, msg)})
	}
	res := d.callN("agent.log", map[string]any{"agent_id": "long"})
	first, _ := res["events"].([]any)[0].(map[string]any)
	data, _ := first["data"].(map[string]any)
	if first["event"] != "agent.created" || data["agent_id"] != id || data["name"] != "long" {
		b, _ := json.Marshal(first)
		t.Fatalf("agent.log first event = %.300s, want agent.created of %s", b, id)
	}
}
