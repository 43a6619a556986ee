package recoverrun

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/warren-dev/warren/engine/internal/agentload"
	"github.com/warren-dev/warren/engine/internal/placement"
	"github.com/warren-dev/warren/quarantine"
	"github.com/warren-dev/warren/store"
)

// classify sorts the loaded logs (placement.Classify): damaged ones are
// listed corrupt, uncreated ones settled (orphan or quarantine),
// terminated ones remembered and closed; the rest, by id, are returned to
// be placed in the tree. existing holds every id with a durable
// agent.created; ended lists the terminated ones whose log owes notices
// (their termination's: notices.owed).
func (r *Run[A]) classify(loaded []*Agent[A], rep *Report) (live map[string]*Agent[A], existing placement.Existing, ended []*Agent[A]) {
	h := r.Host
	live = map[string]*Agent[A]{}
	ls := make([]placement.Loaded, len(loaded))
	for i, l := range loaded {
		ls[i] = placement.Loaded{ID: l.ID, Parent: l.State.ParentID, Damaged: l.Err != nil, Created: l.State.Created, Terminated: l.State.Terminated}
	}
	cl := placement.Classify(ls)
	for i, l := range loaded {
		switch cl.Classes[i] {
		case placement.Corrupt:
			rep.Corrupt++
			if errors.Is(l.Err, agentload.ErrUnopened) {
				r.Logger.Error("agent log could not be opened; the agent is listed with the cause until a restart", "agent", l.ID, "err", l.Err)
			} else {
				r.Logger.Error("agent log is damaged; the agent is listed as corrupt", "agent", l.ID, "err", l.Err)
			}
			if l.State.Name == "" {
				l.State.Name = l.ID
			}
			h.ListCorrupt(l, l.Err)
		case placement.Uncreated:
			r.settleUncreated(l, cl.Parents[l.ID], rep)
		case placement.Gone:
			rep.Terminated++
			h.Forget(l)
			if l.State.Notices != nil {
				ended = append(ended, l)
			}
			_ = l.Log.Close()
			h.DropLease(l.ID) // nothing more is written for it
		default:
			live[l.ID] = l
			if l.Resumed != nil {
				rep.Resumed++
			}
		}
	}
	return live, cl.Existing, ended
}

// An agent directory whose log holds no agent.created is either the orphan
// of a crash during creation, which recovery removes, or something recovery
// cannot account for, which it moves to <home>/quarantine and never deletes
// (package quarantine says why that is safe).

// settleUncreated removes or quarantines the directory of a loaded agent
// without agent.created, and counts it. isParent says another agent's
// agent.created names it as parent: it existed, so it is no orphan.
func (r *Run[A]) settleUncreated(l *Agent[A], isParent bool, rep *Report) {
	if l.Log != nil {
		_ = l.Log.Close()
	}
	dir := r.Dir(l.ID)
	why, empty := quarantine.ProvablyEmpty(r.FS, dir, l.Missing, l.Log)
	settle, why := placement.Settle(why, empty, isParent, r.Clustered, l.Missing)
	switch settle {
	case placement.RemoveOrphan:
		rep.Orphans++
		r.Logger.Warn("removing an orphan agent directory (crash during creation: it holds no acknowledged entry)", "agent", l.ID)
		r.Host.RemoveOrphanDir(l.ID)
		return
	case placement.ListCorrupt:
		// A cluster store's log is not a local directory: nothing is
		// moved (the store still lists it); the agent is listed corrupt.
		rep.Corrupt++
		r.Logger.Error("agent log without agent.created in the cluster store; listed as corrupt", "agent", l.ID, "why", why)
		l.State.Name = l.ID
		r.Host.ListCorrupt(l, fmt.Errorf("its log in the cluster store holds no agent.created (%s); it is not quarantined (see `warren export`)", why))
		return
	}
	dst, moved, err := quarantine.Move(r.FS, r.Home, dir, r.Now())
	if moved && err != nil {
		r.Logger.Error("quarantined an agent directory, but making the move durable failed", "agent", l.ID, "to", dst, "err", err)
	}
	if !moved {
		// It stays where it is, listed as corrupt.
		rep.Corrupt++
		r.Logger.Error("agent directory without agent.created could not be quarantined; listed as corrupt",
			"agent", l.ID, "why", why, "err", err)
		l.State.Name = l.ID
		r.Host.ListCorrupt(l, fmt.Errorf("%s: %s; moving it to %s failed: %w", dir, why,
			filepath.Join(r.Home, quarantine.Dir), err))
		return
	}
	rep.Quarantined++
	r.Logger.Warn("moved an unreadable agent directory to quarantine; nothing was deleted",
		"agent", l.ID, "why", why, "to", dst)
}

// loadQuarantine indexes the agent directories in <home>/quarantine by id.
func (r *Run[A]) loadQuarantine() {
	q, err := quarantine.Index(r.FS, r.Home)
	if err != nil {
		r.Logger.Warn("cannot list the quarantine directory", "dir", filepath.Join(r.Home, quarantine.Dir), "err", err)
	}
	r.Host.SetQuarantine(q)
}

// loadedOrLater drops from all the agents whose log the cluster did not
// serve in time (store.ErrUnavailable), giving their claims back: the next
// scan takes them, rather than listing them as corrupt.
func (r *Run[A]) loadedOrLater(all []*Agent[A]) []*Agent[A] {
	kept := all[:0]
	for _, l := range all {
		if l.Err != nil && errors.Is(l.Err, store.ErrUnavailable) {
			r.Logger.Warn("the cluster did not serve an agent's log; the next takeover scan tries again", "agent", l.ID, "err", l.Err)
			r.Host.DropLease(l.ID)
			continue
		}
		kept = append(kept, l)
	}
	return kept
}
