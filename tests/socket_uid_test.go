package tests

import (
	"bufio"
	"bytes"
	"context"
	"errors"
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

// nobodyUID is the uid the cross-user checks run as.
const nobodyUID = 65534

// TestSocketPeerUIDAndPermissions checks that the home is 0700 and the
// socket 0600, and, when the test runs as root (so it can act as two
// users), both directions of the peer check on real sockets: another user
// cannot reach a root daemon's socket, and a daemon running as another
// user refuses root's connection with a clear error while it keeps serving
// its own user.
func TestSocketPeerUIDAndPermissions(t *testing.T) {
	t.Parallel()
	d := startTestDaemon(t, modeBinary)
	for path, want := range map[string]os.FileMode{d.Home: 0o700, d.Sock: 0o600} {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != want {
			t.Fatalf("%s has mode %v, want %v", path, st.Mode().Perm(), want)
		}
	}
	if os.Geteuid() != 0 {
		t.Log("not root: the cross-user checks need two uids; the mode checks above ran")
		return
	}
	dir, err := os.MkdirTemp("", "w")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	home := filepath.Join(dir, "h")
	bin := filepath.Join(dir, "warren")
	data, err := os.ReadFile(procBinary)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Another user cannot reach root's daemon (its home and socket are
	// owner-only): the client sees no daemon.
	other := exec.Command(bin, "--home", d.Home, "--json", "daemon", "status")
	other.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobodyUID, Gid: nobodyUID}}
	out, err := other.CombinedOutput()
	if err == nil || strings.Contains(string(out), "boot_id") {
		t.Fatalf("uid %d reached root's daemon: err %v, output %s", nobodyUID, err, out)
	}

	// A daemon running as nobody refuses root (SO_PEERCRED), on both framings.
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(home, nobodyUID, nobodyUID); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	daemonCmd := exec.CommandContext(ctx, bin, "daemon", "start", "--foreground", "--home", home)
	daemonCmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobodyUID, Gid: nobodyUID}}
	var dout lockedBuffer
	daemonCmd.Stdout, daemonCmd.Stderr = &dout, &dout
	if err := daemonCmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = daemonCmd.Wait()
		close(exited)
	}()
	defer func() {
		_ = daemonCmd.Process.Signal(syscall.SIGTERM)
		<-exited
	}()
	sock := filepath.Join(home, "daemon.sock")
	deadline := time.Now().Add(procReadyDeadline)
	var lastErr error
	for {
		_, lastErr = rawCallJSON(ctx, sock, "daemon.status")
		if protocol.IsCode(lastErr, protocol.CodeInvalid) {
			break // refused: the daemon is up and checked our uid
		}
		select {
		case <-exited:
			t.Fatalf("the daemon running as uid %d exited: %s", nobodyUID, dout.String())
		default:
		}
		if lastErr == nil {
			t.Fatalf("a daemon running as uid %d served root", nobodyUID)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answer from the daemon running as uid %d: %v\n%s", nobodyUID, lastErr, dout.String())
		}
		time.Sleep(10 * time.Millisecond) // polling the socket: no readiness signal across users
	}
	if !strings.Contains(lastErr.Error(), "permission denied") {
		t.Fatalf("refusal message %q does not say permission denied", lastErr)
	}
	_, err = rawCallNative(ctx, sock, "daemon.status")
	wantCode(t, "native request from another uid", err, protocol.CodeInvalid)
	// root's own clients refuse to talk to a daemon of another uid before
	// sending anything (tested in depth by TestClientRefusesServerOfAnotherUID).
	if _, err := protocol.CallJSON(ctx, sock, "daemon.status", nil); !errors.Is(err, protocol.ErrUntrustedServer) {
		t.Fatalf("CallJSON to a daemon of uid %d: %v, want ErrUntrustedServer", nobodyUID, err)
	}
	// Its own user is served. The socket answers from the daemon's start,
	// refusing other uids at once and every request with "recovering"
	// (code 6) until its recovery is done: ask again until then.
	for {
		own := exec.Command(bin, "--home", home, "--json", "daemon", "status")
		own.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobodyUID, Gid: nobodyUID}}
		var ownOut bytes.Buffer
		own.Stdout, own.Stderr = &ownOut, &ownOut
		err := own.Run()
		if err == nil && strings.Contains(ownOut.String(), "boot_id") {
			break
		}
		if !strings.Contains(ownOut.String(), "recovering") || time.Now().After(deadline) {
			t.Fatalf("the daemon's own user is not served: %v\n%s", err, ownOut.String())
		}
		time.Sleep(10 * time.Millisecond) // polling the socket: no readiness signal across users
	}
}

// rawCallJSON makes one newline-JSON request without the client's check
// of the server's uid (to test the server's own refusal).
func rawCallJSON(ctx context.Context, sock, method string) (map[string]any, error) {
	line, err := protocol.EncodeJSONRequest(&protocol.Request{ID: "req-1", Method: method})
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write(line); err != nil {
		return nil, err
	}
	_ = c.(*net.UnixConn).CloseWrite()
	b, err := io.ReadAll(c)
	if err != nil {
		return nil, err
	}
	return frameResult(protocol.DecodeJSONFrame(bytes.TrimSpace(b)))
}

// rawCallNative is rawCallJSON with the native framing.
func rawCallNative(ctx context.Context, sock, method string) (map[string]any, error) {
	req, err := protocol.EncodeNativeRequest(&protocol.Request{ID: int64(1), Method: method})
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write(req); err != nil {
		return nil, err
	}
	payload, err := protocol.ReadNativeFrame(bufio.NewReader(c), protocol.MaxFrame)
	if err != nil {
		return nil, err
	}
	return frameResult(protocol.DecodeNativeFrame(payload))
}

func frameResult(f *protocol.Frame, err error) (map[string]any, error) {
	if err != nil {
		return nil, err
	}
	if f.Kind == protocol.KindError {
		return nil, f.Error
	}
	m, _ := f.Result.(map[string]any)
	return m, nil
}
