package token

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func TestMintShapes(t *testing.T) {
	tok, client, err := Mint("agent1", "run1", t0.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckID(tok.ID); err != nil {
		t.Fatalf("minted id %q: %v", tok.ID, err)
	}
	id, secret, err := Parse(client)
	if err != nil {
		t.Fatalf("Parse(minted): %v", err)
	}
	if id != tok.ID {
		t.Fatalf("client string id %q, token id %q", id, tok.ID)
	}
	raw, _ := base64.RawURLEncoding.DecodeString(secret)
	sum := sha256.Sum256(raw)
	if tok.SecretHash != hex.EncodeToString(sum[:]) {
		t.Fatal("SecretHash is not the hex SHA-256 of the secret bytes")
	}
	if strings.Contains(tok.SecretHash, secret) || tok.State != Live || tok.AgentID != "agent1" || tok.RunID != "run1" {
		t.Fatalf("unexpected token %+v", tok)
	}
	tok2, client2, _ := Mint("agent1", "run1", t0)
	if tok2.ID == tok.ID || client2 == client {
		t.Fatal("two mints gave the same id or secret")
	}
	if _, _, err := Mint("", "run1", t0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Mint without agent: %v, want ErrInvalid", err)
	}
}

func TestParseMalformed(t *testing.T) {
	_, good, _ := Mint("a", "r", t0)
	id, secret, _ := Parse(good)
	cases := map[string]string{
		"empty":             "",
		"no dot":            id + secret,
		"id only":           id + ".",
		"secret only":       "." + secret,
		"bad prefix":        "tik_" + id[4:] + "." + secret,
		"upper hex":         strings.ToUpper(id[:4]) + strings.ToUpper(id[4:]) + "." + secret,
		"short id":          id[:len(id)-1] + "." + secret,
		"non-hex id":        id[:len(id)-1] + "g." + secret,
		"short secret":      id + "." + secret[:42],
		"long secret":       id + "." + secret + "A",
		"non-base64 secret": id + "." + strings.Repeat("!", 43),
		"padded secret":     id + "." + secret[:42] + "=",
		"two dots":          id + "." + secret[:20] + "." + secret[21:],
		"multibyte":         id + "." + strings.Repeat("é", 21) + "a",
	}
	for name, s := range cases {
		t.Run(name, func(t *testing.T) {
			_, _, err := Parse(s)
			if !errors.Is(err, ErrMalformed) || !errors.Is(err, ErrRejected) {
				t.Fatalf("Parse(%q) = %v, want ErrMalformed wrapping ErrRejected", s, err)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("error echoes the secret: %v", err)
			}
		})
	}
}

func newLive(t *testing.T, s *Service, agent, run string, deadline time.Time) (Token, string) {
	t.Helper()
	tok, client, err := Mint(agent, run, deadline)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Add(tok); err != nil {
		t.Fatal(err)
	}
	return tok, client
}

func TestConsumeSuccessAndIdempotentRepeat(t *testing.T) {
	s := NewService()
	tok, client := newLive(t, s, "a1", "r1", t0.Add(time.Minute))
	calls := 0
	var seen Token
	commit := func(x Token) error { calls++; seen = x; return nil }

	got, repeat, err := s.Consume("a1", "r1", client, "yes", t0, commit)
	if err != nil || repeat {
		t.Fatalf("Consume = %v, %v", repeat, err)
	}
	if calls != 1 || seen.State != Consumed || seen.Response != "yes" || seen.ID != tok.ID {
		t.Fatalf("commit saw %+v after %d calls", seen, calls)
	}
	if got.State != Consumed || got.Response != "yes" {
		t.Fatalf("returned %+v", got)
	}
	if st, _ := s.Get(tok.ID); st.State != Consumed {
		t.Fatalf("stored state %q", st.State)
	}

	got, repeat, err = s.Consume("a1", "r1", client, "yes", t0.Add(time.Hour), commit)
	if err != nil || !repeat || got.Response != "yes" {
		t.Fatalf("repeat = %+v, %v, %v; want idempotent success", got, repeat, err)
	}
	if calls != 1 {
		t.Fatalf("repeat called commit (%d calls)", calls)
	}

	_, _, err = s.Consume("a1", "r1", client, "no", t0, commit)
	if !errors.Is(err, ErrConsumed) || !errors.Is(err, ErrRejected) {
		t.Fatalf("different response: %v, want ErrConsumed", err)
	}
	if calls != 1 {
		t.Fatal("rejected consume called commit")
	}
	if _, ok := s.Live("a1"); ok {
		t.Fatal("consumed token still reported live")
	}
}

func TestConsumeRejections(t *testing.T) {
	s := NewService()
	dl := t0.Add(time.Minute)
	tok, client := newLive(t, s, "a1", "r1", dl)
	_, other := newLive(t, s, "a2", "r2", dl)
	_, otherSecret, _ := Parse(other)
	_, unknown, _ := Mint("a1", "r1", dl)
	never := func(Token) error { t.Fatal("commit called for a rejected consume"); return nil }

	cases := []struct {
		name, agent, run, presented string
		now                         time.Time
		want                        error
	}{
		{"malformed", "a1", "r1", "garbage", t0, ErrMalformed},
		{"unknown id", "a1", "r1", unknown, t0, ErrUnknown},
		{"wrong secret", "a1", "r1", Format(tok.ID, otherSecret), t0, ErrWrongSecret},
		{"agent mismatch", "a2", "r1", client, t0, ErrMismatch},
		{"run mismatch", "a1", "r2", client, t0, ErrMismatch},
		{"past deadline", "a1", "r1", client, dl.Add(time.Nanosecond), ErrExpired},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := s.Consume(c.agent, c.run, c.presented, "resp", c.now, never)
			if !errors.Is(err, c.want) || !errors.Is(err, ErrRejected) {
				t.Fatalf("err = %v, want %v wrapping ErrRejected", err, c.want)
			}
		})
	}
	if st, _ := s.Get(tok.ID); st.State != Live {
		t.Fatalf("rejections changed the state to %q", st.State)
	}
	// Exactly at the deadline is still in time.
	if _, _, err := s.Consume("a1", "r1", client, "r", dl, nil); err != nil {
		t.Fatalf("consume at the deadline: %v", err)
	}
}

func TestNoDeadlineNeverExpires(t *testing.T) {
	s := NewService()
	_, client := newLive(t, s, "a", "r", time.Time{})
	if got := s.Expire(t0.AddDate(100, 0, 0), nil); len(got) != 0 {
		t.Fatalf("expired %d tokens without deadline", len(got))
	}
	if _, _, err := s.Consume("a", "r", client, "x", t0.AddDate(100, 0, 0), nil); err != nil {
		t.Fatal(err)
	}
}

func TestRevoke(t *testing.T) {
	s := NewService()
	tok, client := newLive(t, s, "a1", "r1", t0.Add(time.Minute))
	if err := s.Revoke(tok.ID, "x", func(Token) error { return errors.New("disk full") }); err == nil {
		t.Fatal("revoke with failing commit succeeded")
	}
	if st, _ := s.Get(tok.ID); st.State != Live {
		t.Fatal("failed revoke changed the state")
	}
	var seen Token
	if err := s.Revoke(tok.ID, "new user message", func(x Token) error { seen = x; return nil }); err != nil {
		t.Fatal(err)
	}
	if seen.State != Revoked || seen.Reason != "new user message" {
		t.Fatalf("commit saw %+v", seen)
	}
	if err := s.Revoke(tok.ID, "again", func(Token) error { t.Fatal("second revoke committed"); return nil }); err != nil {
		t.Fatalf("revoking twice: %v", err)
	}
	_, _, err := s.Consume("a1", "r1", client, "resp", t0, nil)
	if !errors.Is(err, ErrRevoked) || !errors.Is(err, ErrRejected) || !strings.Contains(err.Error(), "new user message") {
		t.Fatalf("consume revoked: %v", err)
	}
	if err := s.Revoke("tok_0000000000000000", "x", nil); !errors.Is(err, ErrUnknown) {
		t.Fatalf("revoke unknown: %v", err)
	}
	tok2, client2 := newLive(t, s, "a1", "r2", time.Time{})
	if _, _, err := s.Consume("a1", "r2", client2, "ok", t0, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Revoke(tok2.ID, "x", nil); !errors.Is(err, ErrConsumed) {
		t.Fatalf("revoke consumed: %v", err)
	}
}

func TestExpireSweep(t *testing.T) {
	s := NewService()
	early, earlyClient := newLive(t, s, "a1", "r1", t0.Add(time.Minute))
	late, _ := newLive(t, s, "a2", "r2", t0.Add(2*time.Minute))
	future, _ := newLive(t, s, "a3", "r3", t0.Add(time.Hour))
	failing, _ := newLive(t, s, "a4", "r4", t0.Add(time.Minute))

	var committed []string
	got := s.Expire(t0.Add(10*time.Minute), func(x Token) error {
		if x.State != Expired {
			t.Errorf("commit saw state %q", x.State)
		}
		if x.ID == failing.ID {
			return errors.New("io error")
		}
		committed = append(committed, x.ID)
		return nil
	})
	if len(got) != 2 || got[0].ID != early.ID || got[1].ID != late.ID {
		t.Fatalf("expired %+v, want %s then %s", got, early.ID, late.ID)
	}
	if st, _ := s.Get(future.ID); st.State != Live {
		t.Fatal("future token expired")
	}
	if st, _ := s.Get(failing.ID); st.State != Live {
		t.Fatal("token whose commit failed is not live")
	}
	_, _, err := s.Consume("a1", "r1", earlyClient, "x", t0, nil)
	if !errors.Is(err, ErrExpired) {
		t.Fatalf("consume after sweep: %v", err)
	}
	if again := s.Expire(t0.Add(10*time.Minute), nil); len(again) != 1 || again[0].ID != failing.ID {
		t.Fatalf("second sweep expired %+v, want only the retried token", again)
	}
}

func TestCommitFailureLeavesLive(t *testing.T) {
	s := NewService()
	tok, client := newLive(t, s, "a", "r", t0.Add(time.Minute))
	boom := errors.New("fsync failed")
	_, _, err := s.Consume("a", "r", client, "resp", t0, func(Token) error { return boom })
	if !errors.Is(err, boom) || errors.Is(err, ErrRejected) {
		t.Fatalf("err = %v, want the commit error and not a rejection", err)
	}
	if st, _ := s.Get(tok.ID); st.State != Live || st.Response != "" {
		t.Fatalf("after failed commit: %+v", st)
	}
	if lt, ok := s.Live("a"); !ok || lt.ID != tok.ID {
		t.Fatal("token not live after failed commit")
	}
	if _, repeat, err := s.Consume("a", "r", client, "resp", t0, nil); err != nil || repeat {
		t.Fatalf("retry after failed commit: %v %v", repeat, err)
	}
}

func TestAddRecoveredAndInvalid(t *testing.T) {
	s := NewService()
	tok, client, _ := Mint("a", "r", t0.Add(time.Minute))
	tok.State = Consumed
	tok.Response = "earlier"
	if err := s.Add(tok); err != nil {
		t.Fatal(err)
	}
	if _, repeat, err := s.Consume("a", "r", client, "earlier", t0, nil); err != nil || !repeat {
		t.Fatalf("repeat against a recovered consumed token: %v %v", repeat, err)
	}
	bad := []Token{
		{},
		{ID: tok.ID, AgentID: "a", RunID: "r", SecretHash: "zz", State: Live},
		{ID: tok.ID, AgentID: "", RunID: "r", SecretHash: tok.SecretHash, State: Live},
		{ID: tok.ID, AgentID: "a", RunID: "r", SecretHash: tok.SecretHash, State: "bogus"},
	}
	for i, b := range bad {
		if err := s.Add(b); !errors.Is(err, ErrInvalid) {
			t.Errorf("bad token %d: %v", i, err)
		}
	}
}

func TestLivePicksNewest(t *testing.T) {
	s := NewService()
	newLive(t, s, "a", "r1", time.Time{})
	second, _ := newLive(t, s, "a", "r2", time.Time{})
	newLive(t, s, "b", "r3", time.Time{})
	if got, ok := s.Live("a"); !ok || got.ID != second.ID {
		t.Fatalf("Live = %+v %v", got, ok)
	}
	if _, ok := s.Live("nobody"); ok {
		t.Fatal("Live for unknown agent")
	}
	s.Remove(second.ID)
	if got, ok := s.Live("a"); !ok || got.RunID != "r1" {
		t.Fatalf("after Remove: %+v %v", got, ok)
	}
}
