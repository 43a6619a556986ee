package natsembed

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// signalWriter is a log's output that signals when a line containing
// want is written.
type signalWriter struct {
	want string
	mu   sync.Mutex
	buf  bytes.Buffer
	saw  chan struct{}
	once sync.Once
}

func (w *signalWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.want) {
		w.once.Do(func() { close(w.saw) })
	}
	return len(p), nil
}

// startPair starts two servers routed to each other, with the given
// route secrets; a's log goes to out.
func startPair(t *testing.T, secretA, secretB string, out *signalWriter) (a, b func() int) {
	t.Helper()
	ports, err := FreeLoopbackPorts(2)
	if err != nil {
		t.Fatal(err)
	}
	url := func(i int) string { return fmt.Sprintf("nats://127.0.0.1:%d", ports[i]) }
	la := hclog.New(&hclog.LoggerOptions{Output: out, Level: hclog.Warn})
	sa, err := Start(Options{Name: "a", Dir: t.TempDir(), Port: -1, ClusterName: "c", ClusterPort: ports[0], Routes: []string{url(1)},
		RouteSecret: secretA, Logger: la, UnsafeLazyFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sa.Shutdown(); sa.WaitForShutdown() })
	sb, err := Start(Options{Name: "b", Dir: t.TempDir(), Port: -1, ClusterName: "c", ClusterPort: ports[1], Routes: []string{url(0)},
		RouteSecret: secretB, UnsafeLazyFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Shutdown(); sb.WaitForShutdown() })
	return sa.NumRoutes, sb.NumRoutes
}

// TestRoutesNeedTheSecret: two servers with the same route secret form a
// cluster; a server with another secret (a node without the cluster's
// key) is refused, and the refusal is in the daemon's log.
func TestRoutesNeedTheSecret(t *testing.T) {
	_, k1, _ := ed25519.GenerateKey(rand.Reader)
	_, k2, _ := ed25519.GenerateKey(rand.Reader)
	if RoutePassword(k1) == RoutePassword(k2) || RoutePassword(k1) != RoutePassword(k1) {
		t.Fatal("route passwords are not one per key")
	}

	t.Run("same", func(t *testing.T) {
		routes, _ := startPair(t, RoutePassword(k1), RoutePassword(k1), &signalWriter{want: "never", saw: make(chan struct{})})
		deadline := time.Now().Add(30 * time.Second)
		for routes() == 0 {
			if time.Now().After(deadline) {
				t.Fatal("two servers with the same secret formed no route in 30 s")
			}
			time.Sleep(20 * time.Millisecond) // polling the server's route count: it offers no event
		}
	})

	t.Run("other", func(t *testing.T) {
		out := &signalWriter{want: "authentication error", saw: make(chan struct{})}
		routes, _ := startPair(t, RoutePassword(k1), RoutePassword(k2), out)
		select {
		case <-out.saw:
		case <-time.After(30 * time.Second):
			out.mu.Lock()
			defer out.mu.Unlock()
			t.Fatalf("no route refusal logged in 30 s; the log:\n%s", out.buf.String())
		}
		if n := routes(); n != 0 {
			t.Fatalf("a server with another secret was routed to (%d routes)", n)
		}
	})
}

// TestServerLogOncePerKind: a client refused again and again (a new
// connection id each time) is logged once a minute, not once a try;
// another kind of message is logged too.
func TestServerLogOncePerKind(t *testing.T) {
	var buf bytes.Buffer
	l := newServerLog(hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Warn}))
	for i := range 50 {
		l.Errorf("%s - %s", fmt.Sprintf("127.0.0.1:%d - cid:%d", 40000+i, i), "authentication error")
	}
	l.Warnf("route %s refused", "nats://127.0.0.1:6222")
	if n := strings.Count(buf.String(), "authentication error"); n != 1 {
		t.Fatalf("50 refusals logged %d times, want once:\n%s", n, buf.String())
	}
	if !strings.Contains(buf.String(), "route nats://127.0.0.1:6222 refused") {
		t.Fatalf("another kind of message was not logged:\n%s", buf.String())
	}
}
