package token

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// consumeRace has n goroutines consume one token at once, with the same
// response when sameResponse is set and distinct responses otherwise.
func consumeRace(t *testing.T, n int, sameResponse bool) {
	t.Helper()
	s := NewService()
	tok, client := newLive(t, s, "a", "r", t0.Add(time.Minute))
	var commits atomic.Int32
	var wins, repeats, consumed atomic.Int32
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp := "same"
			if !sameResponse {
				resp = fmt.Sprintf("resp-%d", i)
			}
			<-start
			_, repeat, err := s.Consume("a", "r", client, resp, t0, func(Token) error {
				commits.Add(1)
				return nil
			})
			switch {
			case err == nil && !repeat:
				wins.Add(1)
			case err == nil && repeat:
				repeats.Add(1)
			case errors.Is(err, ErrConsumed):
				consumed.Add(1)
			default:
				t.Errorf("unexpected result: repeat=%v err=%v", repeat, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if wins.Load() != 1 || commits.Load() != 1 {
		t.Fatalf("wins=%d commits=%d, want exactly one of each", wins.Load(), commits.Load())
	}
	if sameResponse && repeats.Load() != int32(n-1) {
		t.Fatalf("repeats=%d, want %d", repeats.Load(), n-1)
	}
	if !sameResponse && consumed.Load() != int32(n-1) {
		t.Fatalf("ErrConsumed=%d, want %d", consumed.Load(), n-1)
	}
	if st, _ := s.Get(tok.ID); st.State != Consumed {
		t.Fatalf("final state %q", st.State)
	}
}

func TestConcurrentConsumeExactlyOneWins(t *testing.T) {
	t.Run("distinct responses", func(t *testing.T) { consumeRace(t, 50, false) })
	t.Run("same response", func(t *testing.T) { consumeRace(t, 50, true) })
}

// TestConcurrentMixedOperations races consume, revoke, expire and Live on
// many tokens; each token must end in exactly one final state with one
// commit.
func TestConcurrentMixedOperations(t *testing.T) {
	rounds := 20
	if os.Getenv("WARREN_LONG") == "1" {
		rounds = 2000
	}
	for range rounds {
		s := NewService()
		tok, client := newLive(t, s, "a", "r", t0.Add(time.Minute))
		var commits atomic.Int32
		commit := func(Token) error { commits.Add(1); return nil }
		start := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(4)
		go func() { defer wg.Done(); <-start; s.Consume("a", "r", client, "x", t0, commit) }()
		go func() { defer wg.Done(); <-start; s.Revoke(tok.ID, "user message", commit) }()
		go func() { defer wg.Done(); <-start; s.Expire(t0.Add(time.Hour), commit) }()
		go func() { defer wg.Done(); <-start; s.Live("a") }()
		close(start)
		wg.Wait()
		st, _ := s.Get(tok.ID)
		if st.State == Live || commits.Load() != 1 {
			t.Fatalf("final state %q after %d commits", st.State, commits.Load())
		}
	}
}

func FuzzParse(f *testing.F) {
	_, good, _ := Mint("a", "r", time.Time{})
	f.Add(good)
	f.Add("")
	f.Add("tok_.")
	f.Add("tok_0123456789abcdef.")
	f.Fuzz(func(t *testing.T, s string) {
		id, secret, err := Parse(s)
		if err != nil {
			if !errors.Is(err, ErrRejected) {
				t.Fatalf("error does not wrap ErrRejected: %v", err)
			}
			return
		}
		if Format(id, secret) != s {
			t.Fatalf("Format(Parse(%q)) differs", s)
		}
	})
}

func BenchmarkConsume(b *testing.B) {
	s := NewService()
	clients := make([]string, b.N)
	for i := range b.N {
		tok, client, _ := Mint("a", fmt.Sprint("r", i), time.Time{})
		s.Add(tok)
		clients[i] = client
	}
	b.ResetTimer()
	for i := range b.N {
		if _, _, err := s.Consume("a", fmt.Sprint("r", i), clients[i], "resp", t0, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMint(b *testing.B) {
	for range b.N {
		if _, _, err := Mint("a", "r", time.Time{}); err != nil {
			b.Fatal(err)
		}
	}
}
