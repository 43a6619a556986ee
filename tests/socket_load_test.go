package tests

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/warren-dev/warren/protocol"
)

// TestSocketHundredConnectionsHundredRequests runs 100 native connections
// at once, each sending 100 requests; every reply matches its request.
// 100 more goroutines do the same over the JSON framing (one connection
// per request).
func TestSocketHundredConnectionsHundredRequests(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode procMode) {
		t.Parallel()
		d := startTestDaemon(t, mode)
		const agents = 10
		ids := make([]string, agents)
		for i := range ids {
			ids[i] = d.createAgent(fmt.Sprintf("a%d", i), "inproc", "echo", "")
		}
		const conns, perConn = 100, 100
		errs := make(chan error, 2*conns)
		var wg sync.WaitGroup
		for c := 0; c < conns; c++ {
			wg.Add(1)
			go func(c int) {
				defer wg.Done()
				errs <- hammerNative(d.Sock, c, perConn, ids)
			}(c)
			wg.Add(1)
			go func(c int) {
				defer wg.Done()
				errs <- hammerJSON(d.Sock, c, 10, ids)
			}(c)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		d.callN("daemon.status", nil)
	})
}

// hammerNative sends n requests on one native connection, several in
// flight at once, and checks each reply belongs to its request.
func hammerNative(sock string, c, n int, ids []string) error {
	ctx := context.Background()
	cl, err := protocol.Dial(ctx, sock)
	if err != nil {
		return err
	}
	defer cl.Close()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			errs <- checkedRequest(ctx, cl.Call, c, i, ids)
		}(i)
		if i%4 == 3 { // keep about 4 in flight per connection
			wg.Wait()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return fmt.Errorf("native connection %d: %w", c, err)
		}
	}
	return nil
}

func hammerJSON(sock string, c, n int, ids []string) error {
	call := func(ctx context.Context, m string, p map[string]any) (map[string]any, error) {
		return protocol.CallJSON(ctx, sock, m, p)
	}
	for i := 0; i < n; i++ {
		if err := checkedRequest(context.Background(), call, c, i, ids); err != nil {
			return fmt.Errorf("json client %d: %w", c, err)
		}
	}
	return nil
}

// checkedRequest sends request i of connection c: agent.inspect of one
// agent, agent.list, or an unknown agent (code 1), and checks the answer.
func checkedRequest(ctx context.Context, call rpcFunc, c, i int, ids []string) error {
	switch i % 3 {
	case 0:
		id := ids[(c+i)%len(ids)]
		res, err := call(ctx, "agent.inspect", map[string]any{"agent_id": id})
		if err != nil {
			return fmt.Errorf("request %d: agent.inspect: %w", i, err)
		}
		if res["agent_id"] != id {
			return fmt.Errorf("request %d: agent.inspect %s answered for %v", i, id, res["agent_id"])
		}
	case 1:
		res, err := call(ctx, "agent.list", nil)
		if err != nil {
			return fmt.Errorf("request %d: agent.list: %w", i, err)
		}
		if l, _ := res["agents"].([]any); len(l) != len(ids) {
			return fmt.Errorf("request %d: agent.list has %d agents, want %d", i, len(l), len(ids))
		}
	default:
		_, err := call(ctx, "agent.inspect", map[string]any{"agent_id": fmt.Sprintf("ghost%d", i)})
		if !protocol.IsCode(err, protocol.CodeNotFound) {
			return fmt.Errorf("request %d: inspect of an unknown agent: %v, want code 1", i, err)
		}
	}
	return nil
}

// TestSocketPipelinedOutOfOrder writes a slow agent.send (a scripted turn
// blocked on a FIFO) and then 20 agent.list requests on the same native
// connection without waiting: the 20 answers come back first, the send's
// answer after the turn is released.
func TestSocketPipelinedOutOfOrder(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode procMode) {
		t.Parallel()
		d := startTestDaemon(t, mode)
		script := writeScripts(t, d.dir)
		d.createAgent("slow", "scripted", script, "")
		fifo := filepath.Join(d.dir, "gate")
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		conn, err := net.Dial("unix", d.Sock)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		var batch []byte
		frame := func(id int, method string, params map[string]any) {
			b, err := protocol.EncodeNativeRequest(&protocol.Request{ID: int64(id), Method: method, Params: params})
			if err != nil {
				t.Fatal(err)
			}
			batch = append(batch, b...)
		}
		frame(1, "agent.send", map[string]any{"agent_id": "slow", "message": "fifo " + fifo})
		const fast = 20
		for i := 2; i < 2+fast; i++ {
			frame(i, "agent.list", nil)
		}
		if _, err := conn.Write(batch); err != nil { // one write: all pipelined
			t.Fatal(err)
		}
		r := bufio.NewReader(conn)
		read := func() *protocol.Frame {
			t.Helper()
			payload, err := protocol.ReadNativeFrame(r, protocol.MaxFrame)
			if err != nil {
				t.Fatal(err)
			}
			f, err := protocol.DecodeNativeFrame(payload)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
		seen := map[string]bool{}
		for len(seen) < fast {
			f := read()
			id := fmt.Sprint(f.ID)
			if id == "1" {
				t.Fatalf("the slow send was answered before the %d fast requests (got %d): %+v", fast, len(seen), f)
			}
			if f.Kind != protocol.KindResult || seen[id] {
				t.Fatalf("frame for id %s: %+v (seen %v)", id, f, seen)
			}
			seen[id] = true
		}
		// Release the turn: opening the FIFO for writing returns once the
		// script has it open for reading.
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.WriteString("go"); err != nil {
			t.Fatal(err)
		}
		w.Close()
		f := read()
		res, _ := f.Result.(map[string]any)
		if fmt.Sprint(f.ID) != "1" || f.Kind != protocol.KindResult || res["response"] != "fifo: go" {
			t.Fatalf("slow send answer = %+v", f)
		}
	})
}
