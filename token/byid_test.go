package token

import (
	"errors"
	"testing"
	"time"
)

// TestConsumeByID: the public id consumes a live token once, with the same
// agent and run checks as Consume; any later answer by id (the same
// response included) is ErrConsumed; a revoked, an expired, an unknown or
// a malformed id is rejected, and the commit is not called.
func TestConsumeByID(t *testing.T) {
	s := NewService()
	tok, _ := newLive(t, s, "a1", "r1", t0.Add(time.Minute))
	calls := 0
	commit := func(Token) error { calls++; return nil }
	if _, err := s.ConsumeByID("a2", "r1", tok.ID, "yes", t0, commit); !errors.Is(err, ErrMismatch) {
		t.Fatalf("another agent: %v, want ErrMismatch", err)
	}
	got, err := s.ConsumeByID("a1", "r1", tok.ID, "yes", t0, commit)
	if err != nil || got.State != Consumed || got.Response != "yes" || calls != 1 {
		t.Fatalf("ConsumeByID = %+v, %v (%d commits)", got, err, calls)
	}
	for _, resp := range []string{"yes", "no"} {
		if _, err := s.ConsumeByID("a1", "r1", tok.ID, resp, t0, commit); !errors.Is(err, ErrConsumed) || !errors.Is(err, ErrRejected) {
			t.Fatalf("second answer %q: %v, want ErrConsumed", resp, err)
		}
	}
	rev, _ := newLive(t, s, "a1", "r2", t0.Add(time.Minute))
	if err := s.Revoke(rev.ID, "new_message", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ConsumeByID("a1", "r2", rev.ID, "x", t0, commit); !errors.Is(err, ErrRevoked) {
		t.Fatalf("revoked: %v", err)
	}
	late, _ := newLive(t, s, "a1", "r3", t0.Add(time.Minute))
	if _, err := s.ConsumeByID("a1", "r3", late.ID, "x", t0.Add(time.Hour), commit); !errors.Is(err, ErrExpired) {
		t.Fatalf("overdue: %v", err)
	}
	if _, err := s.ConsumeByID("a1", "r1", "tok_nope", "x", t0, commit); !errors.Is(err, ErrMalformed) {
		t.Fatalf("malformed id: %v", err)
	}
	stranger, _, err := Mint("a1", "r9", t0.Add(time.Minute)) // never added
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ConsumeByID("a1", "r9", stranger.ID, "x", t0, commit); !errors.Is(err, ErrUnknown) {
		t.Fatalf("unknown id: %v", err)
	}
	if calls != 1 {
		t.Fatalf("commit called %d times, want 1", calls)
	}
}
