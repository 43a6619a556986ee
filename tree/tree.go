package tree

import (
	"errors"
	"fmt"
	"github.com/warren-dev/warren/internal/textcut"
	"slices"
	"strings"
	"sync"

	"github.com/warren-dev/warren/schema"
)

// Sentinel participants: they are never agents in the tree.
const (
	// User is the operator. Only root agents may message it.
	User = "USER"
	// System is the daemon itself (error notices, reminders, subscriptions).
	// As a sender it bypasses the one-hop rule.
	System = "SYSTEM"
)

// Errors callers test with errors.Is.
var (
	ErrInvalidName   = errors.New("invalid agent name")
	ErrInvalidID     = errors.New("invalid agent id")
	ErrNameTaken     = errors.New("agent name taken")
	ErrUnknownParent = errors.New("unknown parent agent")
	ErrExists        = errors.New("agent already exists")
	ErrNotFound      = errors.New("agent not found")
	ErrHasChildren   = errors.New("agent has children")
	ErrAmbiguous     = errors.New("ambiguous agent reference")
	ErrRoute         = errors.New("route not allowed")
)

// treeError carries an exact message and the sentinel it stands for, so the
// text reads naturally while errors.Is still matches the sentinel.
type treeError struct {
	msg      string
	sentinel error
}

func (e *treeError) Error() string { return e.msg }
func (e *treeError) Unwrap() error { return e.sentinel }

func errorf(sentinel error, format string, args ...any) error {
	return &treeError{msg: fmt.Sprintf(format, args...), sentinel: sentinel}
}

// ValidateName reports whether name is a valid agent name: it matches
// ^[A-Za-z][A-Za-z0-9_.-]{0,63}$ and is not USER or SYSTEM. The error wraps
// ErrInvalidName.
func ValidateName(name string) error {
	if name == User || name == System {
		return errorf(ErrInvalidName, "invalid agent name %q: USER and SYSTEM are reserved for the operator and the daemon; choose another name", name)
	}
	if !schema.ValidName(name) {
		return errorf(ErrInvalidName,
			"invalid agent name %q: a name is 1-64 characters, starts with a letter and uses only letters, digits, '_', '.' and '-'",
			truncate(name, 80))
	}
	return nil
}

// ValidateID reports whether id is an agent id: 32 lowercase hex characters.
// The error wraps ErrInvalidID.
func ValidateID(id string) error {
	if !isHex32(id) {
		return errorf(ErrInvalidID, "invalid agent id %q: an id is 32 lowercase hex characters", truncate(id, 80))
	}
	return nil
}

// NormalizeID returns the canonical 32-lowercase-hex form of an id given as
// 32 hex characters (any case) or as a dashed UUID (8-4-4-4-12). ok is false
// when s is neither.
func NormalizeID(s string) (id string, ok bool) {
	if len(s) == 36 && s[8] == '-' && s[13] == '-' && s[18] == '-' && s[23] == '-' {
		s = s[:8] + s[9:13] + s[14:18] + s[19:23] + s[24:]
	}
	s = strings.ToLower(s)
	if !isHex32(s) {
		return "", false
	}
	return s, true
}

func isHex32(s string) bool {
	if len(s) != 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func truncate(s string, n int) string { return textcut.Cut(s, n, "...") }

// Node is a snapshot of one agent in the tree. Children is a copy, in
// creation order.
type Node struct {
	ID       string
	Name     string
	ParentID string // "" for a root
	Children []string
}

type node struct {
	id       string
	name     string
	parent   string
	children []string
}

// Tree is the agent tree. The zero value is an empty tree; New returns one
// too. A Tree is safe for concurrent use.
type Tree struct {
	mu     sync.RWMutex
	nodes  map[string]*node
	roots  []string
	byName map[string][]string // name -> ids, creation order
}

// New returns an empty tree.
func New() *Tree {
	return &Tree{nodes: make(map[string]*node), byName: make(map[string][]string)}
}

// Add inserts agent id with the given name under parentID ("" makes it a
// root). Errors: ErrInvalidID, ErrInvalidName, ErrExists (id already in the
// tree), ErrUnknownParent, ErrNameTaken (a sibling, the parent or, for a
// root, another root already has the name).
func (t *Tree) Add(id, name, parentID string) error {
	if err := ValidateID(id); err != nil {
		return err
	}
	if err := ValidateName(name); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.nodes == nil {
		t.nodes, t.byName = make(map[string]*node), make(map[string][]string)
	}
	if _, ok := t.nodes[id]; ok {
		return errorf(ErrExists, "agent %s already exists (%s); ids are unique", id, t.pathLocked(id))
	}
	var siblings []string
	if parentID == "" {
		siblings = t.roots
	} else {
		p, ok := t.nodes[parentID]
		if !ok {
			return errorf(ErrUnknownParent, "cannot add agent %q: parent %s is not in the tree", name, truncate(parentID, 80))
		}
		if p.name == name {
			return errorf(ErrNameTaken, "cannot add agent %q under %s: a child may not share its parent's name; choose another name",
				name, t.pathLocked(parentID))
		}
		siblings = p.children
	}
	for _, sid := range siblings {
		if t.nodes[sid].name == name {
			if parentID == "" {
				return errorf(ErrNameTaken, "cannot add root agent %q: another root already has that name; choose another name", name)
			}
			return errorf(ErrNameTaken, "cannot add agent %q under %s: a sibling already has that name; choose another name",
				name, t.pathLocked(parentID))
		}
	}
	t.nodes[id] = &node{id: id, name: name, parent: parentID}
	if parentID == "" {
		t.roots = append(t.roots, id)
	} else {
		p := t.nodes[parentID]
		p.children = append(p.children, id)
	}
	t.byName[name] = append(t.byName[name], id)
	return nil
}

// Remove deletes a leaf agent. Errors: ErrNotFound, ErrHasChildren (remove
// the children first).
func (t *Tree) Remove(id string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, ok := t.nodes[id]
	if !ok {
		return errorf(ErrNotFound, "cannot remove agent %s: it is not in the tree", truncate(id, 80))
	}
	if len(n.children) > 0 {
		return errorf(ErrHasChildren, "cannot remove agent %s: it has %d child agent(s); remove them first",
			t.pathLocked(id), len(n.children))
	}
	if n.parent == "" {
		t.roots = deleteID(t.roots, id)
	} else if p, ok := t.nodes[n.parent]; ok {
		p.children = deleteID(p.children, id)
	}
	if ids := deleteID(t.byName[n.name], id); len(ids) > 0 {
		t.byName[n.name] = ids
	} else {
		delete(t.byName, n.name)
	}
	delete(t.nodes, id)
	return nil
}

func deleteID(ids []string, id string) []string {
	return slices.DeleteFunc(ids, func(s string) bool { return s == id })
}

// Get returns a copy of the node for id.
func (t *Tree) Get(id string) (Node, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	n, ok := t.nodes[id]
	if !ok {
		return Node{}, false
	}
	return Node{ID: n.id, Name: n.name, ParentID: n.parent, Children: slices.Clone(n.children)}, true
}

// Has reports whether id is in the tree.
func (t *Tree) Has(id string) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	_, ok := t.nodes[id]
	return ok
}

// Name returns the agent's name, or "" when id is not in the tree.
func (t *Tree) Name(id string) string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if n, ok := t.nodes[id]; ok {
		return n.name
	}
	return ""
}

// DisplayName is the name to show for a message participant: USER and
// SYSTEM as themselves, an agent by its name, anything else as given.
func (t *Tree) DisplayName(id string) string {
	if id == User || id == System {
		return id
	}
	if name := t.Name(id); name != "" {
		return name
	}
	return id
}

// Parent returns the parent id ("" for a root); ok is false when id is not
// in the tree.
func (t *Tree) Parent(id string) (parentID string, ok bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	n, ok := t.nodes[id]
	if !ok {
		return "", false
	}
	return n.parent, true
}

// IsRoot reports whether id is a root agent in the tree.
func (t *Tree) IsRoot(id string) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	n, ok := t.nodes[id]
	return ok && n.parent == ""
}

// Children returns the ids of id's children in creation order (nil when id
// is unknown or a leaf).
func (t *Tree) Children(id string) []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if n, ok := t.nodes[id]; ok {
		return slices.Clone(n.children)
	}
	return nil
}

// Siblings returns the other agents with the same parent, in creation
// order. Roots have no routing siblings: the result for a root is nil.
func (t *Tree) Siblings(id string) []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.siblingsLocked(id)
}

func (t *Tree) siblingsLocked(id string) []string {
	n, ok := t.nodes[id]
	if !ok || n.parent == "" {
		return nil
	}
	var out []string
	for _, c := range t.nodes[n.parent].children {
		if c != id {
			out = append(out, c)
		}
	}
	return out
}

// Roots returns the root agents in creation order.
func (t *Tree) Roots() []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return slices.Clone(t.roots)
}

// Subtree returns id and all its descendants in preorder (children in
// creation order); nil when id is unknown.
func (t *Tree) Subtree(id string) []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if _, ok := t.nodes[id]; !ok {
		return nil
	}
	return t.preorderLocked(nil, id)
}

// Walk returns every agent, depth first from the roots in creation order
// (each root followed by its subtree in preorder), for listings.
func (t *Tree) Walk() []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]string, 0, len(t.nodes))
	for _, r := range t.roots {
		out = t.preorderLocked(out, r)
	}
	return out
}

func (t *Tree) preorderLocked(out []string, id string) []string {
	stack := []string{id}
	for len(stack) > 0 {
		cur := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		out = append(out, cur)
		ch := t.nodes[cur].children
		for i := len(ch) - 1; i >= 0; i-- {
			stack = append(stack, ch[i])
		}
	}
	return out
}

// Path returns the slash path of names from the root to id ("lead/worker").
// USER and SYSTEM return themselves; an unknown id returns "".
func (t *Tree) Path(id string) string {
	if id == User || id == System {
		return id
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	if _, ok := t.nodes[id]; !ok {
		return ""
	}
	return t.pathLocked(id)
}

func (t *Tree) pathLocked(id string) string {
	var names []string
	for cur := id; cur != ""; {
		n, ok := t.nodes[cur]
		if !ok {
			break
		}
		names = append(names, n.name)
		cur = n.parent
	}
	slices.Reverse(names)
	return strings.Join(names, "/")
}

// Len returns the number of agents in the tree.
func (t *Tree) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.nodes)
}
