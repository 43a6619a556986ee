package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warren-dev/warren/cmd/warren/internal/exit"
	"github.com/warren-dev/warren/cmd/warren/internal/textarg"
)

// TestMessageFromStdinAndFile: a MESSAGE of "-" is read from standard
// input and --file reads one from a file; both carry a message over the
// 128 KiB one command-line argument may hold to the agent whole. A message
// over the daemon's limit, or over what one request carries, is refused
// with an error that names the limit (exit 1).
func TestMessageFromStdinAndFile(t *testing.T) {
	t.Parallel()
	home := shortHome(t)
	startDaemon(t, home)
	mustOK(t, "agent", "create", "big", "--provider", "inproc", "--model", "echo", "--home", home)

	msg := strings.Repeat("0123456789abcdef", 200<<10/16) + "\nend"
	r := warrenIn(t, msg, "agent", "send", "big", "-", "--home", home)
	if r.code != 0 || r.stdout != "echo: "+msg+"\n" {
		t.Fatalf("send - with a %d-byte message on stdin: exit %d, stdout %d bytes (want %d), stderr %q",
			len(msg), r.code, len(r.stdout), len("echo: "+msg+"\n"), r.stderr)
	}
	file := filepath.Join(t.TempDir(), "msg.txt")
	if err := os.WriteFile(file, []byte("from a file "+msg), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := mustOK(t, "agent", "send", "big", "--file", file, "--home", home); out != "echo: from a file "+msg+"\n" {
		t.Fatalf("send --file: stdout %d bytes, want %d", len(out), len("echo: from a file "+msg+"\n"))
	}
	// The log holds the whole message (the agent got it, not a cut one).
	if logs := mustOK(t, "logs", "big", "--json", "--home", home); strings.Count(logs, "0123456789abcdef") < 2*(200<<10/16) {
		t.Errorf("the log does not hold both messages whole")
	}

	// Both at once, or neither, is a usage error.
	if r := warren(t, "agent", "send", "big", "hi", "--file", file, "--home", home); r.code != exit.Usage {
		t.Errorf("send with MESSAGE and --file: exit %d, want 2", r.code)
	}
	if r := warren(t, "agent", "send", "big", "--home", home); r.code != exit.Usage || !strings.Contains(r.stderr, "missing MESSAGE") {
		t.Errorf("send without a message: exit %d stderr %q, want 2", r.code, r.stderr)
	}
	if r := warren(t, "agent", "send", "big", "--file", filepath.Join(home, "nope"), "--home", home); r.code != exit.DaemonErr || !strings.Contains(r.stderr, "nope") {
		t.Errorf("send --file of a missing file: exit %d stderr %q, want 1 naming it", r.code, r.stderr)
	}

	// Over the daemon's limit (limits.message_bytes, 1 MiB by default).
	over := strings.Repeat("x", 1<<20+1)
	r = warrenIn(t, over, "agent", "send", "big", "-", "--home", home)
	if r.code != exit.DaemonErr || !strings.Contains(r.stderr, "limits.message_bytes") {
		t.Errorf("send of %d bytes: exit %d stderr %q, want 1 naming limits.message_bytes", len(over), r.code, r.stderr)
	}
	// Over what one request carries: refused by the CLI before sending.
	huge := filepath.Join(t.TempDir(), "huge.txt")
	if err := os.WriteFile(huge, make([]byte, textarg.MaxBytes+1), 0o600); err != nil {
		t.Fatal(err)
	}
	r = warren(t, "agent", "send", "big", "--file", huge, "--home", home)
	if r.code != exit.DaemonErr || !strings.Contains(r.stderr, "at most 16 MiB") || !strings.Contains(r.stderr, "limits.message_bytes") {
		t.Errorf("send --file of %d bytes: exit %d stderr %q, want 1 naming both limits", textarg.MaxBytes+1, r.code, r.stderr)
	}
}

// TestResumeResponseFromStdin: agent resume takes its RESPONSE from
// standard input with "-".
func TestResumeResponseFromStdin(t *testing.T) {
	t.Parallel()
	home := shortHome(t)
	script := filepath.Join(home, "ask.sh")
	if err := os.WriteFile(script, []byte(askScript), 0o700); err != nil {
		t.Fatal(err)
	}
	startDaemon(t, home)
	mustOK(t, "agent", "create", "a", "--provider", "scripted", "--model", script, "--home", home)
	sj := mustJSON(t, "agent", "send", "a", "deploy", "--home", home)
	token, _ := sj["token"].(string)
	if token == "" {
		t.Fatalf("send did not suspend: %v", sj)
	}
	r := warrenIn(t, "ship-it", "agent", "resume", "a", "--token", token, "-", "--home", home)
	if r.code != 0 || r.stdout != "approved: ship-it\n" {
		t.Errorf("resume with the response on stdin: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
}
