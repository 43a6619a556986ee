package engine

import (
	"errors"
	fold "github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/tree"
)

// notFound is the error for an agent reference that names no agent
// served (ErrNotFound).
func notFound(ref string) error {
	return failf(ErrNotFound, "agent %q not found; list agents with `warren agent list`", ref)
}

// Resolve turns an agent reference (path, unique name or id) into the id
// of an agent served. Corrupt agents, which are not in the tree, resolve
// by id or by name. An empty or ambiguous reference is
// ErrInvalid; one that names a terminated agent is ErrNotFound saying so;
// one that names no agent, notFound.
func (r *roster) Resolve(ref string) (string, error) {
	if ref == "" {
		return "", failf(ErrInvalid, "missing agent reference")
	}
	id, err := r.tree.Resolve(ref)
	if err == nil {
		return id, nil
	}
	if nid, ok := tree.NormalizeID(ref); ok {
		if _, found := r.Get(nid); found {
			return nid, nil
		}
	}
	if errors.Is(err, tree.ErrAmbiguous) {
		return "", failf(ErrInvalid, "%w", err)
	}
	for _, a := range r.List() { // each record read under its own lock, the roster's released
		var match bool
		a.View(func(p *fold.State, l liveFlags) { match = l.Corrupt != nil && p.Name == ref })
		if match {
			return a.ID(), nil
		}
	}
	gone, path := r.findGone(ref)
	if gone != "" {
		return "", failf(ErrNotFound, "agent %s (%s) is terminated: it takes no messages or turns; create a new agent "+
			"(warren agent list --all shows the terminated ones)", path, gone)
	}
	return "", notFound(ref)
}

// findGone is the id and path of the terminated agent ref names ("" when
// none).
func (r *roster) findGone(ref string) (id, path string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if id = r.gone.Find(ref, r.tree.Path); id != "" {
		path = r.gone.Path(id, r.tree.Path)
	}
	return id, path
}

// ResolveAny is Resolve, where a reference to a terminated agent gives its
// id too.
func (r *roster) ResolveAny(ref string) (string, error) {
	id, err := r.Resolve(ref)
	if err == nil || !errors.Is(err, ErrNotFound) {
		return id, err
	}
	if gone, _ := r.findGone(ref); gone != "" {
		return gone, nil
	}
	return "", err
}

// Ordered returns the agents served in agent.list's order (Order):
// depth-first from the roots, then those not in the tree.
func (r *roster) Ordered() []*agent {
	walk := r.tree.Walk()
	all := r.List()
	byID := make(map[string]*agent, len(all))
	ids := make([]string, 0, len(all))
	for _, a := range all {
		byID[a.ID()] = a
		ids = append(ids, a.ID())
	}
	out := make([]*agent, 0, len(all))
	for _, id := range listOrder(walk, ids) {
		out = append(out, byID[id])
	}
	return out
}

// DisplayName is how a sender appears in prompts and inbox listings:
// USER and SYSTEM as themselves, an agent in the tree by its name, one
// out of it (corrupt) by the name its log gives, a terminated one by the
// path it had, and an id the roster does not know as itself.
func (r *roster) DisplayName(id string) string {
	switch id {
	case tree.User, tree.System:
		return id
	}
	if n, ok := r.tree.Get(id); ok {
		return n.Name
	}
	if a, ok := r.Get(id); ok {
		return a.Name()
	}
	if p := r.GonePath(id); p != "" {
		return p
	}
	return id
}
