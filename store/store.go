package store

import (
	"context"
	"errors"
	"time"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/session"
)

// UserID is the id under which the USER inbox log is opened, read and
// owned (Store.UserLog, Read, ReadSeq, Own).
const UserID = "USER"

// Sentinel errors. Test for them with errors.Is.
var (
	// ErrFenced reports an append refused because another owner claimed
	// the log since this handle last wrote. The handle is poisoned for
	// good (the error also wraps eventlog.ErrPoisoned): release the agent,
	// never retry on the handle.
	ErrFenced = errors.New("log fenced: another owner has claimed this agent")
	// ErrOwned is returned by Own when another daemon holds a live lease on
	// the agent; retry after its lease expires (the owner TTL).
	ErrOwned = errors.New("agent is owned by another daemon")
	// ErrNotFound reports a log or snapshot that does not exist. Errors
	// carrying it also wrap fs.ErrNotExist (logs) or session.ErrNotExist
	// (snapshots), as the code before the store did.
	ErrNotFound = errors.New("not found")
	// ErrUnavailable reports that a cluster store's servers did not answer
	// (a leader election, a server going away, a lost connection) after
	// the store's own retries: the data is not in question; try again
	// later. The local store never returns it.
	ErrUnavailable = errors.New("the cluster did not answer")
	// ErrUnknownOutcome reports an append that failed in a way that
	// leaves it unknown whether its entries were stored (a cluster's
	// answer lost in an election): the handle refuses appends until it
	// has read what the store holds, and hands the entries to OnAppend
	// if they were (store/jetstream). The local store never returns it:
	// its failed appends are never stored.
	ErrUnknownOutcome = errors.New("the append may or may not be stored")
	// ErrCorrupt is eventlog.ErrCorrupt: a line failing its CRC, content
	// or seq order, whatever store served it.
	ErrCorrupt = eventlog.ErrCorrupt
	// ErrPoisoned is eventlog.ErrPoisoned: appends refused after a failed
	// write (see ErrFenced for the permanent case).
	ErrPoisoned = eventlog.ErrPoisoned
)

// Store is where the daemon's durable state lives. Its methods are safe
// for concurrent use.
type Store interface {
	// Agents returns the ids that have a log (UserID excluded), in no
	// particular order.
	Agents(ctx context.Context) ([]string, error)
	// OpenLog opens (or, unless o.MustExist, creates) the log of agent id,
	// replaying its entries through o.Replay first. At most one handle per
	// log may be open in a daemon.
	OpenLog(ctx context.Context, id string, o LogOptions) (Log, error)
	// UserLog opens the USER inbox log (OpenLog with UserID).
	UserLog(ctx context.Context, o LogOptions) (Log, error)
	// Read returns a reader of the entries of id's log with seq >= fromSeq,
	// starting its search at the position hint (0: the start). The log
	// need not be open; nothing is changed.
	Read(ctx context.Context, id string, fromSeq uint64, hint int64) (Reader, error)
	// ReadSeq returns the entry seq of id's log, looking at hint first.
	// A missing seq is an error wrapping eventlog.ErrNoSuchSeq.
	ReadSeq(ctx context.Context, id string, seq uint64, hint int64) (eventlog.Entry, error)
	// ReadSeqs reads several entries of id's log, each once, in no promised
	// order (eventlog.ReadSeqs): a checkpoint's witnesses and the messages
	// pending since it, without one open or request setup per line.
	ReadSeqs(ctx context.Context, id string, at []eventlog.At, fn func(i int, e eventlog.Entry) error) error
	// Snapshots stores session snapshots (session.json).
	Snapshots() Snapshots
	// Own claims id (an agent or UserID) for this daemon.
	Own(ctx context.Context, id string) (Lease, error)
	// Close releases what the store holds (connections, the home lock).
	// Open logs must be closed first.
	Close() error
}

// LogOptions configures one log; they mirror the per-log fields of
// eventlog.Options the daemon sets. Store-wide settings (logger, clock,
// file-handle cap, pending-file idle time, heal backoff) are options of
// the store implementation.
type LogOptions struct {
	// OnAppend is called with each committed group of entries, in seq
	// order, after they are durable and before their appenders return. It
	// must be quick and must not append to the same log.
	OnAppend func([]eventlog.Entry)
	// Replay is called by OpenLog with every entry of the log in seq order.
	// An error from it fails OpenLog.
	Replay func(eventlog.Entry) error
	// ReplayBorrows lets Replay see each entry's Data in a read buffer
	// valid only until Replay returns (eventlog.Options.ReplayBorrows); a
	// store may ignore it and hand copies.
	ReplayBorrows bool
	// ReadBuffer is a buffer OpenLog may read the log into while it
	// replays it, and gives back when it returns
	// (eventlog.Options.ReadBuffer); a store may ignore it.
	ReadBuffer []byte
	// Resume starts the replay after the entry it names (a checkpoint:
	// Seq, the position hint Off the store gave, the line's CRC). A
	// mismatch fails with eventlog.ErrResumeMismatch, having changed
	// nothing.
	Resume *eventlog.Resume
	// OnHeal is called when a poisoned handle accepts appends again (a
	// fenced handle never does).
	OnHeal func()
	// MustExist makes OpenLog fail with ErrNotFound (and fs.ErrNotExist)
	// instead of creating a missing log.
	MustExist bool
	// Lease is the claim the log writes under (Store.Own). Stores that
	// fence (store/jetstream) require it; the local store ignores it.
	Lease Lease
}

// Log is an open event log: the methods the daemon calls on *eventlog.Log,
// with reads by handle instead of by path. Safe for concurrent use.
type Log interface {
	// Append appends one entry and returns once it is durable.
	Append(event string, data any) (eventlog.Entry, error)
	// AppendBatch appends entries with consecutive seqs, all or none.
	AppendBatch(recs []eventlog.Record) ([]eventlog.Entry, error)
	// LastSeq is the seq of the last durable entry (0: empty).
	LastSeq() uint64
	// Degraded returns why appends are refused, or nil.
	Degraded() error
	// VerifyPrefix checks the entries a Resume skipped, once.
	VerifyPrefix() error
	// ReadAll returns every entry of the log.
	ReadAll(ctx context.Context) ([]eventlog.Entry, error)
	// Abandon drops the handle without the orderly steps of Close (a
	// simulated crash in tests; the daemon's Abandon).
	Abandon()
	// Close closes the handle.
	Close() error
}

// Reader iterates over entries: Next returns io.EOF after the last.
type Reader interface {
	Next() (eventlog.Entry, error)
	Close() error
}

// Snapshots keeps one session snapshot per agent id. A snapshot is a
// cache of what the log holds: losing one costs a rebuild, never state.
type Snapshots interface {
	// Save validates s and replaces id's snapshot atomically.
	Save(s *session.Session) error
	// Load returns id's snapshot; a missing one is an error wrapping
	// ErrNotFound and session.ErrNotExist.
	Load(id string) (*session.Session, error)
	// Remove deletes id's snapshot; a missing one is not an error.
	Remove(id string) error
}

// Checkpoints keeps one checkpoint per agent id: the daemon's fold of
// the agent's log at one of its entries (package checkpoint's bytes), a
// cache never trusted over the log (the daemon checks it against the
// log's lines before use, and folds the whole log on any doubt). The
// local store keeps them as files the daemon writes itself; a cluster
// store offers its own (store/jetstream: Checkpoints).
type Checkpoints interface {
	// Load returns id's checkpoint; a missing one is an error wrapping
	// ErrNotFound and fs.ErrNotExist.
	Load(ctx context.Context, id string) ([]byte, error)
	// Save replaces id's checkpoint (not necessarily durably: losing one
	// costs a full fold).
	Save(ctx context.Context, id string, data []byte) error
	// Remove deletes id's checkpoint; a missing one is not an error.
	Remove(ctx context.Context, id string) error
	// ResumeAt is the resume point at entry seq of id's log, found at
	// position hint off (the Off the store gave the entry).
	ResumeAt(ctx context.Context, id string, seq uint64, off int64) (eventlog.Resume, error)
}

// Lease is a claim on one id.
type Lease interface {
	// ID is the claimed agent id (or UserID).
	ID() string
	// Epoch names the claim: greater for every later claim of the id.
	Epoch() uint64
	// Lost is closed when the claim can no longer be trusted (another
	// claim took the id, or the store is closed): stop the agent's turns
	// and release it.
	Lost() <-chan struct{}
	// Expires is when the claim lapses unless renewed (zero: never). A
	// holder pauses the agent's side effects while it is past and Lost is
	// open (the servers did not answer the renewal yet).
	Expires() time.Time
	// Release gives the claim up (another daemon may claim at once).
	Release(ctx context.Context) error
}
