package remote

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"

	"github.com/warren-dev/warren/atomicfile"
	"github.com/warren-dev/warren/faultfs"
)

// TestDaemonKeyMadeOnceAndKeptByTokens: the daemon's key is made once
// (made true the first time only) and kept by every later read and by
// the tokens issued after, which carry its public key; a token issued
// after the key keeps the key and the other workers.
func TestDaemonKeyMadeOnceAndKeptByTokens(t *testing.T) {
	fsys := faultfs.NewMem()
	path := filepath.Join("/home", KeysFile)
	if err := fsys.MkdirAll("/home", 0o700); err != nil {
		t.Fatal(err)
	}
	k1, made, err := DaemonKey(fsys, path)
	if err != nil || !made || k1 == nil {
		t.Fatalf("first DaemonKey: key %v, made %v, err %v; want a new key", k1 != nil, made, err)
	}
	k2, made, err := DaemonKey(fsys, path)
	if err != nil || made || !k1.Equal(k2) {
		t.Fatalf("second DaemonKey: made %v, same %v, err %v; want the first key, not made again", made, k1.Equal(k2), err)
	}
	for _, id := range []string{"w1", "w2"} {
		tok, err := IssueToken(fsys, path, id)
		if err != nil {
			t.Fatal(err)
		}
		_, daemonPub, err := ParseToken(tok)
		if err != nil {
			t.Fatal(err)
		}
		if !daemonPub.Equal(k1.Public().(ed25519.PublicKey)) {
			t.Fatalf("token of %s carries another daemon key than the one the daemon made", id)
		}
	}
	k3, made, err := DaemonKey(fsys, path)
	if err != nil || made || !k1.Equal(k3) {
		t.Fatalf("DaemonKey after the tokens: made %v, same %v, err %v", made, k1.Equal(k3), err)
	}
	keys, err := LoadKeys(fsys, path)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys.Workers) != 2 || keys.Workers["w1"] == nil || keys.Workers["w2"] == nil {
		t.Fatalf("workers kept: %v; want w1 and w2", keys.Workers)
	}
}

// TestDaemonKeyCrashAtEveryOp: power is cut at every I/O operation of
// the daemon key's first write, on a file that already holds a worker's
// key: after the reboot the file reads and keeps the worker, and once
// DaemonKey has returned a key, that key is the one on disk.
func TestDaemonKeyCrashAtEveryOp(t *testing.T) {
	for k := 1; ; k++ {
		m := faultfs.NewMem()
		if err := m.MkdirAll("/home", 0o700); err != nil {
			t.Fatal(err)
		}
		if err := m.SyncDir("/"); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("/home", KeysFile)
		// A worker's key and no daemon key: what the first write of the
		// daemon's key must keep.
		w1 := base64.RawURLEncoding.EncodeToString(make([]byte, ed25519.PublicKeySize))
		if err := atomicfile.Write(m, path, []byte(`{"workers": {"w1": "`+w1+`"}}`), 0o600); err != nil {
			t.Fatal(err)
		}
		m.CrashAt(k)
		key, _, err := DaemonKey(m, path)
		done := err == nil
		if !done && !errors.Is(err, faultfs.ErrCrashed) {
			t.Fatalf("k=%d: %v, want a crash", k, err)
		}
		m.CrashAt(0)
		m.Reboot(faultfs.RebootOptions{Mode: faultfs.PowerLoss, Tail: faultfs.TailGarbage, Rand: rand.New(rand.NewPCG(uint64(k), 7))})
		keys, lerr := LoadKeys(m, path)
		switch {
		case lerr != nil:
			t.Fatalf("k=%d: the keys file does not read after the crash: %v", k, lerr)
		case keys.Workers["w1"] == nil:
			t.Fatalf("k=%d: the worker's key was lost", k)
		case done && !key.Equal(keys.Daemon):
			t.Fatalf("k=%d: the daemon key DaemonKey returned is not the one on disk", k)
		}
		// A crash after the rename may leave a key DaemonKey never
		// returned: the next start reads it and uses it.
		if done {
			if k < 3 {
				t.Fatalf("DaemonKey finished after %d operations; want the write's several", k-1)
			}
			return
		}
	}
}

// TestKeysChangedAtOnceKeepEveryChange: the daemon's first start making
// its key while tokens are issued, and tokens issued at once, on the
// real filesystem: every worker's key is in the file at the end, and
// every token carries the daemon's one key.
func TestKeysChangedAtOnceKeepEveryChange(t *testing.T) {
	path := filepath.Join(t.TempDir(), KeysFile)
	const n = 24
	tokens := make([]string, n)
	var daemon ed25519.PrivateKey
	var wg sync.WaitGroup
	errs := make(chan error, n+1)
	wg.Add(n + 1)
	go func() {
		defer wg.Done()
		k, _, err := DaemonKey(faultfs.OS{}, path)
		daemon = k
		errs <- err
	}()
	for i := range n {
		go func() {
			defer wg.Done()
			tok, err := IssueToken(faultfs.OS{}, path, fmt.Sprintf("w%d", i))
			tokens[i] = tok
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	keys, err := LoadKeys(faultfs.OS{}, path)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys.Workers) != n || !keys.Daemon.Equal(daemon) {
		t.Fatalf("the file holds %d workers' keys (want %d) and the daemon's key the start made: %v", len(keys.Workers), n, keys.Daemon.Equal(daemon))
	}
	for i, tok := range tokens {
		priv, daemonPub, err := ParseToken(tok)
		if err != nil {
			t.Fatal(err)
		}
		if !daemonPub.Equal(daemon.Public()) || !keys.Workers[fmt.Sprintf("w%d", i)].Equal(priv.Public()) {
			t.Fatalf("token %d does not match the file", i)
		}
	}
}
