package waits

import (
	"context"
	"sync"
)

// Resumes is one agent's resume bookkeeping, held in memory only: the
// secret of the token minted in each run, until the run's turn result
// hands it out (the live run.waiting event reads it meanwhile), and the
// result of each resume's turn, which a repeat of that resume shares
// instead of starting another. The zero value is ready; it is safe for
// concurrent use, and its lock is a leaf (the package doc).
type Resumes[R any] struct {
	mu      sync.Mutex
	secrets map[string]string        // run id -> secret minted in it
	done    map[string]chan struct{} // token id -> closed when its resume's turn ended
	out     map[string]R             // token id -> that turn's result
}

// Mint keeps the secret of the token minted in run runID.
func (r *Resumes[R]) Mint(runID, secret string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.secrets == nil {
		r.secrets = map[string]string{}
	}
	r.secrets[runID] = secret
}

// Drop forgets the secret minted in run runID (its wait was not logged).
func (r *Resumes[R]) Drop(runID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.secrets, runID)
}

// Take hands out the secret minted in run runID, once ("" after that, or
// when none was minted).
func (r *Resumes[R]) Take(runID string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.secrets[runID]
	delete(r.secrets, runID)
	return s
}

// Secret is the secret minted in run runID and not yet handed out.
func (r *Resumes[R]) Secret(runID string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.secrets[runID]
}

// Open records that the resume with token tokenID was logged: its repeats
// wait for its result (Finish).
func (r *Resumes[R]) Open(tokenID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done == nil {
		r.done = map[string]chan struct{}{}
	}
	r.done[tokenID] = make(chan struct{})
}

// Finish records the result of the resume with token tokenID and lets its
// repeats have it.
func (r *Resumes[R]) Finish(tokenID string, res R) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.out == nil {
		r.out = map[string]R{}
	}
	r.out[tokenID] = res
	if ch := r.done[tokenID]; ch != nil {
		select {
		case <-ch:
		default:
			close(ch)
		}
	}
}

// Shared is the result of the resume with token tokenID, for a repeat of
// it: live is false when no such resume ran in this process; otherwise
// Shared waits for the result, or returns ctx's error if ctx ends first.
func (r *Resumes[R]) Shared(ctx context.Context, tokenID string) (res R, live bool, err error) {
	r.mu.Lock()
	ch, live := r.done[tokenID]
	r.mu.Unlock()
	if !live {
		return res, false, nil
	}
	select {
	case <-ch:
	case <-ctx.Done():
		return res, true, ctx.Err()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out[tokenID], true, nil
}
