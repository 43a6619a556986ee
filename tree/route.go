package tree

// CheckRoute reports whether from may send a message to to. from and to are
// agent ids or the sentinels User and System. The rules (SPEC 6):
//
//   - nobody sends to itself, and nobody sends to SYSTEM;
//   - USER receives only from root agents (and from SYSTEM);
//   - SYSTEM and USER as senders bypass the one-hop rule;
//   - otherwise to must be from's parent, child or sibling.
//
// Rule violations wrap ErrRoute and name the rule; an agent that is not in
// the tree wraps ErrNotFound.
func (t *Tree) CheckRoute(from, to string) error {
	if from == to {
		return errorf(ErrRoute, "cannot send to self")
	}
	if to == System {
		return errorf(ErrRoute, "cannot send to SYSTEM: it is the daemon, not a participant")
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	if from != User && from != System {
		if _, ok := t.nodes[from]; !ok {
			return errorf(ErrNotFound, "sender %s is not in the tree", truncate(from, 80))
		}
	}
	if to == User {
		if from == System {
			return nil
		}
		if t.nodes[from].parent != "" {
			return errorf(ErrRoute, "only root agents can message USER: %s has a parent; send to the parent instead",
				t.pathLocked(from))
		}
		return nil
	}
	toNode, ok := t.nodes[to]
	if !ok {
		return errorf(ErrNotFound, "recipient %s is not in the tree", truncate(to, 80))
	}
	if from == User || from == System {
		return nil
	}
	fromNode := t.nodes[from]
	switch {
	case fromNode.parent == to: // parent
	case toNode.parent == from: // child
	case fromNode.parent != "" && fromNode.parent == toNode.parent: // sibling
	default:
		msg := "one-hop routing: %s can message only its parent, children and siblings; %s is none of these"
		if fromNode.parent == "" && toNode.parent == "" {
			msg += " (roots have no siblings)"
		}
		return errorf(ErrRoute, msg, t.pathLocked(from), t.pathLocked(to))
	}
	return nil
}

// BroadcastTargets returns the recipients of a broadcast from from: all its
// siblings, in creation order. It is an ErrRoute error when there are none
// (roots, only children, USER and SYSTEM) and ErrNotFound when from is not
// in the tree.
func (t *Tree) BroadcastTargets(from string) ([]string, error) {
	if from == User || from == System {
		return nil, errorf(ErrRoute, "broadcast needs siblings: %s has none; only agents with a parent can broadcast", from)
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	if _, ok := t.nodes[from]; !ok {
		return nil, errorf(ErrNotFound, "sender %s is not in the tree", truncate(from, 80))
	}
	sibs := t.siblingsLocked(from)
	if len(sibs) == 0 {
		return nil, errorf(ErrRoute, "broadcast needs siblings: %s has none; roots have no siblings", t.pathLocked(from))
	}
	return sibs, nil
}

// Reachable returns the agents from can message in one hop: its parent,
// then its children, then its siblings (USER is not included). nil when
// from is not in the tree.
func (t *Tree) Reachable(from string) []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	n, ok := t.nodes[from]
	if !ok {
		return nil
	}
	var out []string
	if n.parent != "" {
		out = append(out, n.parent)
	}
	out = append(out, n.children...)
	return append(out, t.siblingsLocked(from)...)
}
