package token

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"sort"
	"sync"
	"time"
)

// Service holds the known tokens and performs their transitions. It is safe
// for concurrent use. Each token has its own lock, held across the commit
// callback, so exactly one caller can move a token out of the live state.
// A commit callback must not call back into the Service for the same token
// (it would wait on the lock it runs under).
type Service struct {
	mu     sync.RWMutex
	tokens map[string]*entry
	seq    uint64 // insertion counter, to pick the newest live token
}

type entry struct {
	mu    sync.Mutex
	tok   Token
	added uint64
}

// NewService returns an empty Service.
func NewService() *Service {
	return &Service{tokens: make(map[string]*entry)}
}

// Add installs a token: a freshly minted one, or one rebuilt from the log by
// recovery (in any state). A token with the same id is replaced. The error
// (wrapping ErrInvalid) reports a token that cannot be valid; it is not
// installed.
func (s *Service) Add(t Token) error {
	if err := t.validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	s.tokens[t.ID] = &entry{tok: t, added: s.seq}
	return nil
}

// Get returns the token with the given id.
func (s *Service) Get(id string) (Token, bool) {
	e := s.lookup(id)
	if e == nil {
		return Token{}, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.tok, true
}

// Remove forgets a token (for example when its agent is terminated).
func (s *Service) Remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tokens, id)
}

func (s *Service) lookup(id string) *entry {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.tokens[id]
}

// Consume validates the presented client string for the run runID of agent
// agentID and consumes the token with response.
//
// Checks, in order: the string's shape (ErrMalformed), the token exists
// (ErrUnknown), the secret matches in constant time (ErrWrongSecret), agent
// and run match (ErrMismatch), the state (ErrConsumed, ErrRevoked,
// ErrExpired) and the deadline against now (ErrExpired). All of these wrap
// ErrRejected.
//
// Then, under the token's lock, commit is called with the token as it will
// be once consumed; the daemon writes token.consumed and run.resumed there
// in one durable batch. If commit fails the token stays live and its error
// is returned wrapped. On success the token is marked consumed and returned.
//
// Repeating a successful consume with the same secret and the same response
// returns (token, true, nil) without calling commit; a different response
// gets ErrConsumed. A nil commit means there is nothing to persist.
func (s *Service) Consume(agentID, runID, presented, response string, now time.Time, commit func(Token) error) (Token, bool, error) {
	id, secret, err := Parse(presented)
	if err != nil {
		return Token{}, false, err
	}
	e := s.lookup(id)
	if e == nil {
		return Token{}, false, fmt.Errorf("%w: no token %s is known (it may belong to another daemon home); ask for a new one", ErrUnknown, id)
	}
	hash, err := HashSecret(secret)
	if err != nil {
		return Token{}, false, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if !hashesEqual(hash, e.tok.SecretHash) {
		return Token{}, false, fmt.Errorf("%w: the secret given for token %s is not the one it was minted with", ErrWrongSecret, id)
	}
	return s.consumeLocked(e, agentID, runID, response, true, now, commit)
}

// ConsumeByID is Consume for an operator who names the wait by its public
// token id instead of presenting the secret (the daemon admits only a local
// peer of its own uid; SPEC 4). The id names exactly one wait: a token that
// is no longer live is refused (ErrConsumed, ErrRevoked, ErrExpired), a
// repeat included, so an answer lands only on the wait the operator saw.
func (s *Service) ConsumeByID(agentID, runID, id, response string, now time.Time, commit func(Token) error) (Token, error) {
	if err := CheckID(id); err != nil {
		return Token{}, err
	}
	e := s.lookup(id)
	if e == nil {
		return Token{}, fmt.Errorf("%w: no wait has token id %s (list the pending waits with warren waits)", ErrUnknown, id)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	t, _, err := s.consumeLocked(e, agentID, runID, response, false, now, commit)
	return t, err
}

// consumeLocked checks agent, run, state and deadline of e's token and
// consumes it; e.mu is held. allowRepeat: a consumed token with the same
// response is a repeat (returned with true) rather than ErrConsumed.
func (s *Service) consumeLocked(e *entry, agentID, runID, response string, allowRepeat bool, now time.Time, commit func(Token) error) (Token, bool, error) {
	t := e.tok
	id := t.ID
	if t.AgentID != agentID || t.RunID != runID {
		return Token{}, false, fmt.Errorf("%w: token %s was minted for agent %s run %s, not agent %s run %s", ErrMismatch, id, t.AgentID, t.RunID, agentID, runID)
	}
	switch t.State {
	case Consumed:
		if !allowRepeat {
			return Token{}, false, fmt.Errorf("%w: the wait of token %s was already answered; list the pending waits with warren waits", ErrConsumed, id)
		}
		if t.Response == response {
			return t, true, nil
		}
		return Token{}, false, fmt.Errorf("%w: token %s was already used to resume run %s with a different response", ErrConsumed, id, runID)
	case Revoked:
		return Token{}, false, fmt.Errorf("%w: token %s was revoked (%s); the wait it belonged to is over", ErrRevoked, id, reasonOr(t.Reason))
	case Expired:
		return Token{}, false, fmt.Errorf("%w: token %s expired at %s; the wait it belonged to is over", ErrExpired, id, t.Deadline.UTC().Format(time.RFC3339))
	case Live:
	default:
		return Token{}, false, fmt.Errorf("%w: token %s is in unknown state %q", ErrRejected, id, t.State)
	}
	if t.Overdue(now) {
		return Token{}, false, fmt.Errorf("%w: token %s passed its deadline %s", ErrExpired, id, t.Deadline.UTC().Format(time.RFC3339))
	}
	next := t
	next.State = Consumed
	next.Response = response
	if commit != nil {
		if err := commit(next); err != nil {
			return Token{}, false, fmt.Errorf("consume token %s: recording the resume failed, the token is still live: %w", id, err)
		}
	}
	e.tok = next
	return next, false, nil
}

// Revoke moves a live token to revoked with reason, after commit (the
// daemon's token.revoked write) succeeded; if commit fails the token stays
// live and the error is returned. Revoking an already revoked token does
// nothing and returns nil. A consumed or expired token cannot be revoked:
// the error wraps ErrConsumed or ErrExpired. An unknown id gets ErrUnknown.
func (s *Service) Revoke(id, reason string, commit func(Token) error) error {
	e := s.lookup(id)
	if e == nil {
		return fmt.Errorf("%w: cannot revoke token %s: no such token", ErrUnknown, id)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	switch e.tok.State {
	case Revoked:
		return nil
	case Consumed:
		return fmt.Errorf("%w: cannot revoke token %s: it was already consumed", ErrConsumed, id)
	case Expired:
		return fmt.Errorf("%w: cannot revoke token %s: it already expired", ErrExpired, id)
	}
	next := e.tok
	next.State = Revoked
	next.Reason = reason
	if commit != nil {
		if err := commit(next); err != nil {
			return fmt.Errorf("revoke token %s: recording the revocation failed, the token is still live: %w", id, err)
		}
	}
	e.tok = next
	return nil
}

// Expire is the deadline sweep: every live token whose deadline is before
// now is moved to expired, each after its own commit (the daemon's
// token.expired and run.interrupted write) succeeded. A token whose commit
// fails stays live and is retried by the next sweep. It returns the tokens
// it expired, ordered by deadline then id.
func (s *Service) Expire(now time.Time, commit func(Token) error) []Token {
	s.mu.RLock()
	cands := make([]*entry, 0)
	for _, e := range s.tokens {
		cands = append(cands, e)
	}
	s.mu.RUnlock()

	var out []Token
	for _, e := range cands {
		e.mu.Lock()
		if e.tok.State == Live && e.tok.Overdue(now) {
			next := e.tok
			next.State = Expired
			if commit == nil || commit(next) == nil {
				e.tok = next
				out = append(out, next)
			}
		}
		e.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Deadline.Equal(out[j].Deadline) {
			return out[i].Deadline.Before(out[j].Deadline)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// Live returns the live token of an agent (the most recently added one if,
// unexpectedly, there are several). A live token may be past its deadline
// until the next sweep.
func (s *Service) Live(agentID string) (Token, bool) {
	s.mu.RLock()
	cands := make([]*entry, 0, 1)
	for _, e := range s.tokens {
		cands = append(cands, e)
	}
	s.mu.RUnlock()
	var best Token
	var bestAdded uint64
	found := false
	for _, e := range cands {
		e.mu.Lock()
		t, added := e.tok, e.added
		e.mu.Unlock()
		if t.AgentID == agentID && t.State == Live && (!found || added > bestAdded) {
			best, bestAdded, found = t, added, true
		}
	}
	return best, found
}

// hashesEqual compares two hex hashes in constant time (for equal lengths).
func hashesEqual(a, b string) bool {
	ab, err1 := hex.DecodeString(a)
	bb, err2 := hex.DecodeString(b)
	if err1 != nil || err2 != nil || len(ab) != sha256.Size || len(bb) != sha256.Size {
		return false
	}
	return subtle.ConstantTimeCompare(ab, bb) == 1
}

func reasonOr(r string) string {
	if r == "" {
		return "no reason given"
	}
	return r
}
