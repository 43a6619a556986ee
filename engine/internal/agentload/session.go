package agentload

import (
	"errors"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/quarantine"
	"github.com/warren-dev/warren/session"
	"github.com/warren-dev/warren/store"
)

// SessionFacts is what an agent's log says of its provider session, as
// Snapshot needs it. Recovery takes it when it folds the log, and the
// read may come later (package snapsave reads session.json when it is
// first needed): nothing changes these facts before that read, since
// every change of the provider session goes through the snapshot.
type SessionFacts struct {
	Provider, Model, Handle string
	// Suspended: the last session event is suspend.result, so a provider
	// blob in session.json is current.
	Suspended bool
}

// FactsOf takes p's session facts.
func FactsOf(p *projection.State) SessionFacts {
	return SessionFacts{Provider: p.SessProvider, Model: p.SessModel, Handle: p.Handle, Suspended: p.Suspended}
}

// Snapshot reads back the session.json of agent id, whose log says p of
// its provider session, and makes it agree with the log: an unreadable one is kept aside
// (moved to the local path snapshotPath names, never overwritten: it may
// hold a provider blob the log does not) and rebuilt from the log; a
// provider blob the log has outdated is dropped. Either repair is saved.
// Failures to save are logged: the log can rebuild the snapshot again.
func Snapshot(snaps store.Snapshots, fsys faultfs.FS, snapshotPath string, id string, p SessionFacts,
	now func() time.Time, log hclog.Logger) *session.Session {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	sess, err := snaps.Load(id)
	if err != nil {
		save := true
		if !errors.Is(err, session.ErrNotExist) {
			// Kept, not overwritten (a link is moved, never followed).
			aside, merr := quarantine.MoveAside(fsys, snapshotPath, now())
			save = merr == nil
			log.Warn("session.json unreadable; kept aside and rebuilt from the log", "agent", id, "err", err,
				"kept_as", aside, "move_err", merr)
		}
		t := now().UTC()
		sess = &session.Session{ID: id, State: session.StateIdle, Provider: p.Provider, Model: p.Model,
			Handle: p.Handle, CreatedAt: t, UpdatedAt: t}
		if save {
			if err := snaps.Save(sess); err != nil {
				log.Error("saving a rebuilt session.json", "agent", id, "err", err)
			}
		}
	}
	if len(sess.ProviderState) > 0 && !p.Suspended {
		// The session was restored (or replaced) after this blob was
		// saved, and the write clearing it did not land before the crash:
		// restoring it would lose every later turn (Substrat's stale-blob
		// bug). The handle and the log are current.
		log.Info("discarding a stale provider blob", "agent", id, "bytes", len(sess.ProviderState))
		sess = sess.Clone()
		sess.ProviderState = nil
		if err := snaps.Save(sess); err != nil {
			log.Error("saving session.json without its stale blob", "agent", id, "err", err)
		}
	}
	return sess
}
