package tree

import "strings"

// Resolve turns an agent reference into an agent id. A reference is a slash
// path of names from a root ("lead/worker"; a leading slash, "/lead", makes
// even a single name a path from the roots), a bare name that matches
// exactly one agent, or an agent id (32 hex characters, or a dashed UUID).
// Names win over ids. Errors: ErrAmbiguous (the message lists the matching paths),
// ErrNotFound (the message names the reference). USER and SYSTEM are not
// agents and do not resolve.
func (t *Tree) Resolve(ref string) (string, error) {
	if ref == "" {
		return "", errorf(ErrNotFound, "empty agent reference: give a path (lead/worker), a name or an agent id")
	}
	if ref == User || ref == System {
		return "", errorf(ErrNotFound, "%s is not an agent: give a path (lead/worker), a name or an agent id", ref)
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	if strings.Contains(ref, "/") {
		return t.resolvePathLocked(strings.TrimPrefix(ref, "/"), ref)
	}
	switch ids := t.byName[ref]; len(ids) {
	case 0:
	case 1:
		return ids[0], nil
	default:
		paths := make([]string, len(ids))
		for i, id := range ids {
			paths[i] = "/" + t.pathLocked(id)
		}
		return "", errorf(ErrAmbiguous, "agent reference %q is ambiguous: it names %d agents (%s); use one of these paths or an agent id",
			ref, len(ids), strings.Join(paths, ", "))
	}
	if id, ok := NormalizeID(ref); ok {
		if _, ok := t.nodes[id]; ok {
			return id, nil
		}
		return "", errorf(ErrNotFound, "no agent with id %s", id)
	}
	return "", errorf(ErrNotFound, "no agent named %q: give a path (lead/worker), a name or an agent id", truncate(ref, 80))
}

// resolvePathLocked follows path (without its optional leading slash) from
// the roots; ref is the reference as given, for messages.
func (t *Tree) resolvePathLocked(path, ref string) (string, error) {
	segs := strings.Split(path, "/")
	cur := ""
	for i, seg := range segs {
		if seg == "" {
			return "", errorf(ErrNotFound, "bad agent path %q: empty path element; write names separated by single slashes, from a root (lead/worker)",
				truncate(ref, 80))
		}
		var level []string
		if i == 0 {
			level = t.roots
		} else {
			level = t.nodes[cur].children
		}
		next := ""
		for _, id := range level {
			if t.nodes[id].name == seg {
				next = id
				break
			}
		}
		if next == "" {
			if i == 0 {
				return "", errorf(ErrNotFound, "no agent at path %q: there is no root agent named %q", truncate(ref, 80), truncate(seg, 80))
			}
			return "", errorf(ErrNotFound, "no agent at path %q: %s has no child named %q",
				truncate(ref, 80), t.pathLocked(cur), truncate(seg, 80))
		}
		cur = next
	}
	return cur, nil
}

// Lookup finds the agent named name that fromID can reach in one hop,
// searching its parent, then its children, then its siblings; tools use it
// to turn a name argument into an id. The name "USER" returns User (route
// checks then decide whether fromID may message it). Errors wrap
// ErrNotFound: `no reachable agent named "x"`.
func (t *Tree) Lookup(fromID, name string) (string, error) {
	if name == User {
		return User, nil
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	from, ok := t.nodes[fromID]
	if !ok {
		return "", errorf(ErrNotFound, "agent %s is not in the tree", truncate(fromID, 80))
	}
	if p, ok := t.nodes[from.parent]; ok && p.name == name {
		return p.id, nil
	}
	for _, c := range from.children {
		if t.nodes[c].name == name {
			return c, nil
		}
	}
	for _, s := range t.siblingsLocked(fromID) {
		if t.nodes[s].name == name {
			return s, nil
		}
	}
	return "", errorf(ErrNotFound, "no reachable agent named %q: %s can reach only its parent, children and siblings",
		truncate(name, 80), t.pathLocked(fromID))
}

// ChildByName returns the direct child of parentID named name. Tools that act
// on subordinates (inspect_agent, poke, gate, ...) use it. Errors wrap
// ErrNotFound: `no child agent named "x"`.
func (t *Tree) ChildByName(parentID, name string) (string, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	p, ok := t.nodes[parentID]
	if !ok {
		return "", errorf(ErrNotFound, "agent %s is not in the tree", truncate(parentID, 80))
	}
	for _, c := range p.children {
		if t.nodes[c].name == name {
			return c, nil
		}
	}
	return "", errorf(ErrNotFound, "no child agent named %q: %s has no direct child with that name",
		truncate(name, 80), t.pathLocked(parentID))
}
