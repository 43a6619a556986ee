package tests

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warren-dev/warren/protocol"
)

// fakeServerEnv makes the test binary a fake daemon listening on the socket
// it names (TestMain): it prints "ready", then for each connection reads
// what the client sends (until EOF, a whole native frame, or 2 s), prints
// "got N bytes" and answers with a forged reply.
const fakeServerEnv = "WARREN_TEST_FAKE_SERVER"

const forgedReply = "FORGED-BY-ANOTHER-USER"

func runFakeServer(sock string) int {
	ln, err := net.Listen("unix", sock)
	if err != nil {
		fmt.Println("listen:", err)
		return 1
	}
	_ = os.Chmod(sock, 0o777)
	fmt.Println("ready")
	for {
		c, err := ln.Accept()
		if err != nil {
			return 0
		}
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		r := bufio.NewReader(c)
		var got []byte
		if b, err := r.Peek(1); err == nil && b[0] == 0 {
			got, _ = protocol.ReadNativeFrame(r, protocol.MaxFrame)
			f, _ := protocol.EncodeNativeFrame(&protocol.Frame{Kind: protocol.KindResult, ID: int64(1),
				Result: map[string]any{"pid": 1, "boot_id": forgedReply, "response": forgedReply}})
			_, _ = c.Write(f)
		} else {
			got, _ = io.ReadAll(r)
			_, _ = c.Write([]byte(`{"id":"req-1","result":{"boot_id":"` + forgedReply + `"}}` + "\n"))
		}
		fmt.Printf("got %d bytes\n", len(got))
		c.Close()
	}
}

// TestClientRefusesServerOfAnotherUID: a socket in the home served by
// another uid (who swapped daemon.sock for their own) gets nothing from
// the CLI, the native client or the JSON client: SO_PEERCRED is checked
// before anything is sent, and the forged reply is never shown.
func TestClientRefusesServerOfAnotherUID(t *testing.T) {
	needRoot(t)
	t.Parallel()
	dir, home := newHomeDir(t)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	chownNobody(t, home)
	// The fake server is this test binary, copied where uid 65534 can run it.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "fake")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(home, "daemon.sock")
	fake := exec.Command(bin)
	fake.Env = append(os.Environ(), fakeServerEnv+"="+sock)
	fake.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobodyUID, Gid: nobodyUID}}
	out, err := fake.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	fake.Stderr = os.Stderr
	if err := fake.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = fake.Process.Kill()
		_ = fake.Wait()
	})
	lines := bufio.NewScanner(out)
	next := func() string {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("the fake server ended: %v", lines.Err())
		}
		return lines.Text()
	}
	if l := next(); l != "ready" {
		t.Fatalf("fake server: %s", l)
	}
	for _, args := range [][]string{
		{"--json", "daemon", "status"},
		{"--json", "agent", "send", "lead", "TOP-SECRET message"},
	} {
		r := runCLI(t, home, args...)
		r.want(t, 1, strings.Join(args, " ")+" against another uid's socket")
		if strings.Contains(r.stdout+r.stderr, forgedReply) {
			t.Fatalf("the CLI showed the forged reply:\n%s%s", r.stdout, r.stderr)
		}
		if !strings.Contains(r.stderr, "served by uid 65534") || !strings.Contains(r.stderr, "nothing was sent") {
			t.Fatalf("the refusal does not say who serves the socket: %s", r.stderr)
		}
		if l := next(); l != "got 0 bytes" {
			t.Fatalf("%v: the fake server %s; the CLI must send nothing", args, l)
		}
	}
	ctx := procCtx(t)
	if _, err := protocol.Dial(ctx, sock); !errors.Is(err, protocol.ErrUntrustedServer) {
		t.Fatalf("protocol.Dial: %v, want ErrUntrustedServer", err)
	}
	if l := next(); l != "got 0 bytes" {
		t.Fatalf("native client: the fake server %s", l)
	}
	res, err := protocol.CallJSON(ctx, sock, "agent.send", map[string]any{"agent_id": "lead", "message": "TOP-SECRET"})
	if !errors.Is(err, protocol.ErrUntrustedServer) || res != nil {
		t.Fatalf("protocol.CallJSON: %v %v, want ErrUntrustedServer", res, err)
	}
	if l := next(); l != "got 0 bytes" {
		t.Fatalf("JSON client: the fake server %s", l)
	}
}
