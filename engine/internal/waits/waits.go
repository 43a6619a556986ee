// Package waits holds what the engine does with an agent's waits: a run
// suspended on await_input until a human answers, a deadline passes or
// the wait is revoked. It decides and orders the steps; the engine's
// record of the agent carries each one out (the Agent interface, which
// engine/waits.go implements).
//
//   - Begin mints the resume token (package token), logs run.waiting and
//     token.minted in one write and registers the token; the secret is
//     kept (Resumes) until the turn's result hands it out.
//   - Resume answers the wait with the token's secret or, for the
//     operator, its public id: the token service checks it and, under the
//     token's lock, the agent is claimed and token.consumed with
//     run.resumed logged in one write, then the run's turn starts again.
//     A repeat of a resume that succeeded (same token, same response)
//     starts nothing: it shares the first one's result, waiting for it if
//     the turn still runs, or reads it from the log after a restart, or
//     finishes the run if a restart cut the first one's turn off. Without
//     a token, Resume re-runs a run a restart interrupted.
//   - Cancel stops the running turn, or ends the run: the owed end is
//     written if the turn's end could not be logged, otherwise a live
//     wait's token is revoked and turn.cancelled logged.
//   - Sweep expires the waits whose deadline passed (run.interrupted with
//     reason wait_timeout and token.expired in one write); Arm schedules
//     it at a deadline.
//
// Refusals (a token that is not good for the resume, nothing to cancel
// or re-run, a log that refuses appends for now) are the engine's domain
// errors (package domainerr: TokenRejected, WrongState, Unavailable) with
// the user's text. Errors of the agent's own steps (its claim, its log)
// are returned as they are.
//
// # Locks
//
// Resumes has one mutex, a leaf: no method calls out while holding it,
// so it may be taken under the caller's locks (the engine takes it under
// an agent's a.mu, and under the bus's lock for the live run.waiting
// event). Waits holds no state; the token service locks each token
// across its commit, which claims the agent and appends to its log.
package waits

import (
	"errors"
	"fmt"
	"time"

	"github.com/warren-dev/warren/engine/internal/domainerr"
	"github.com/warren-dev/warren/engine/internal/subs"
	"github.com/warren-dev/warren/eventlog"
	fold "github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/session"
	"github.com/warren-dev/warren/token"
	"github.com/warren-dev/warren/tools"
)

// DefaultTimeout applies to await_input without a timeout.
const DefaultTimeout = 24 * time.Hour

// Waits acts on the waits of one engine's agents. R is the engine's turn
// result.
type Waits[R any] struct {
	// Tokens is the engine's token service.
	Tokens *token.Service
	// Now is the engine's clock, read once per step that needs the time.
	Now func() time.Time
	// Result makes the turn result of run runID with status and response,
	// for a resume answered without a turn of its own.
	Result func(runID string, status session.Status, response string) R
}

// Agent is one agent as its waits act on it: the engine's record of it.
// Each method is one step and takes the agent's locks itself.
type Agent[R any] interface {
	// ID and Name identify the agent (Name for error texts).
	ID() string
	Name() string
	// State reads the agent now.
	State() State
	// LastResume is the latest wait the log records answered with a
	// token, and how its run ended.
	LastResume() (fold.Resume, bool)
	// Claim marks the agent busy for a turn, or says why it cannot run
	// one now. Unclaim undoes a claim and nothing else; Release undoes a
	// claim that started no turn (and wakes the agent if it should run).
	Claim() error
	Unclaim()
	Release()
	// Append and AppendBatch write to the agent's log, durable on return
	// (AppendBatch: all records in one write, or none), as store.Log's.
	Append(event string, data any) (eventlog.Entry, error)
	AppendBatch(recs []eventlog.Record) ([]eventlog.Entry, error)
	// Start runs the claimed agent's turn of run again; from is the
	// status it leaves ("waiting", or "" for an interrupted run).
	Start(run fold.Run, from string) <-chan R
	// Changed is closed at the agent's next change outside its log (a
	// turn's end among them).
	Changed() <-chan struct{}
	// Resumes is the agent's resume bookkeeping.
	Resumes() *Resumes[R]
	// Owed reports whether the end of the agent's run is owed (it could
	// not be logged); FlushOwed writes it; OwedErr is the error of a
	// cancel whose run ended but whose end is still not logged (nil when
	// it is).
	Owed() bool
	FlushOwed() error
	OwedErr() error
	// Notices is what the agent's transition from -> to (named key,
	// subs.Key) owes its subscribers, logged in the transition's write
	// (subs.Owed).
	Notices(from, to, key string) []eventlog.Record
	// Cancelled follows a run ended by Cancel (waited: it was a live
	// wait); Expired follows a wait the sweep expired. Each delivers the
	// notices the write owes.
	Cancelled(waited bool)
	Expired()
}

// State is what an operation reads of its agent at its start, in one
// look under the agent's lock.
type State struct {
	// Run is the agent's latest run (zero when it has none).
	Run fold.Run
	// LiveWait: Run waits on a live token.
	LiveWait bool
	// Busy: a turn runs or is being started or unwound.
	Busy bool
	// Turn is the turn the agent runs now (nil when none).
	Turn *Running
}

// Running is a running turn of run RunID: Cancel stops it, Done is closed
// when it ended.
type Running struct {
	RunID  string
	Cancel func()
	Done   <-chan struct{}
}

// refuse is a refusal of condition kind (domainerr.TokenRejected: the
// token is unknown, expired, consumed, revoked or does not match the
// agent's wait; domainerr.WrongState: there is no wait, interrupted run or
// turn to act on; domainerr.Unavailable: the agent's log refuses appends
// until it heals, the same request may work later) with the user's text.
func refuse(kind error, format string, args ...any) error {
	return domainerr.New(kind, format, args...)
}

// Begin suspends run runID (its turn turn) on v: it mints a resume token
// with the deadline v's timeout sets (DefaultTimeout when none), keeps the
// secret in the agent's Resumes, logs run.waiting and token.minted in one
// write and registers the token. It returns the deadline, for the caller
// to arm the sweep.
func (w Waits[R]) Begin(ag Agent[R], v tools.AwaitInput, runID string, turn int) (time.Time, error) {
	timeout := v.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	deadline := w.Now().UTC().Add(timeout)
	tok, secret, err := token.Mint(ag.ID(), runID, deadline)
	if err != nil {
		return time.Time{}, fmt.Errorf("minting a resume token: %w", err)
	}
	ag.Resumes().Mint(runID, secret)
	// The turn's end delivers the notices of busy -> waiting.
	_, err = ag.AppendBatch(append([]eventlog.Record{
		{Event: schema.RunWaiting, Data: schema.RunWaitingData{RunID: runID, WaitKind: v.Kind, Prompt: v.Prompt,
			TokenID: tok.ID, Deadline: deadline.Format(time.RFC3339Nano), SecretHash: tok.SecretHash, Turn: turn}},
		{Event: schema.TokenMinted, Data: schema.TokenData{TokenID: tok.ID, RunID: runID}},
	}, ag.Notices(schema.StateBusy, schema.StateWaiting, subs.Key(runID, turn))...))
	if err != nil {
		ag.Resumes().Drop(runID)
		return time.Time{}, fmt.Errorf("logging run.waiting: %w", err)
	}
	if err := w.Tokens.Add(tok); err != nil {
		return time.Time{}, fmt.Errorf("registering the resume token: %w", err)
	}
	return deadline, nil
}

// Arm schedules sweep (with at, a scheduler's) for the first instant a
// wait with this deadline is overdue: a token expires once the clock is
// past its deadline. Should the sweep find the clock not past it yet (the
// wall clock stepped back), it arms itself again.
func (w Waits[R]) Arm(at func(time.Time, func()) bool, deadline time.Time, sweep func()) {
	at(deadline.Add(time.Nanosecond), func() {
		sweep()
		if !w.Now().After(deadline) {
			w.Arm(at, deadline, sweep)
		}
	})
}

// Sweep expires every live wait whose deadline passed: run.interrupted
// (wait_timeout) and token.expired in the agent's log in one write (with
// the notices of waiting -> idle it owes), then
// the agent's Expired. find looks an agent up (a token of an agent that is
// gone expires with nothing written). A wait whose write fails stays live
// for the next sweep.
func (w Waits[R]) Sweep(find func(agentID string) (Agent[R], bool)) {
	expired := w.Tokens.Expire(w.Now(), func(t token.Token) error {
		ag, ok := find(t.AgentID)
		if !ok {
			return nil
		}
		_, err := ag.AppendBatch(append([]eventlog.Record{
			{Event: schema.RunInterrupted, Data: schema.RunInterruptedData{RunID: t.RunID, Reason: schema.ReasonWaitTimeout}},
			{Event: schema.TokenExpired, Data: schema.TokenData{TokenID: t.ID, RunID: t.RunID}},
		}, ag.Notices(schema.StateWaiting, schema.StateIdle, subs.Key(t.RunID, ag.State().Run.Turn))...))
		return err
	})
	for _, t := range expired {
		if ag, ok := find(t.AgentID); ok {
			ag.Expired()
		}
	}
}

// Revoke revokes a live token of run runID (token.revoked with reason in
// the agent's log). A token that is no longer live is left as it is.
func (w Waits[R]) Revoke(ag Agent[R], tokenID, runID, reason string) error {
	err := w.Tokens.Revoke(tokenID, reason, func(token.Token) error {
		_, err := ag.Append(schema.TokenRevoked, schema.TokenData{TokenID: tokenID, RunID: runID, Reason: reason})
		return err
	})
	if err != nil && !errors.Is(err, token.ErrRejected) {
		return fmt.Errorf("revoking token %s: %w", tokenID, err)
	}
	return nil
}
