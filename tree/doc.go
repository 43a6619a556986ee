// Package tree is warren's agent tree: agent ids and names, parent/child
// structure, reference resolution and the one-hop routing rule (SPEC 6).
//
// The tree holds no I/O and no policy beyond the spec's rules; the daemon
// rebuilds it from agent.created events at boot and keeps it in step with
// spawns and terminations. A Tree is safe for concurrent use.
//
// # Names
//
// A name matches ^[A-Za-z][A-Za-z0-9_.-]{0,63}$ and is neither "USER" nor
// "SYSTEM" (the two sentinel participants). A name is unique among its
// siblings, differs from its parent's name, and roots are unique among roots.
//
// # Ids
//
// An agent id is 32 lowercase hexadecimal characters (the session id). Resolve
// also accepts the dashed UUID form (8-4-4-4-12, any case) and normalises it.
//
// # References
//
// Resolve turns a user-supplied reference into an id, trying in order:
//
//  1. a slash path of names from a root: "lead/worker". A leading slash is
//     allowed and makes a single name a path too: "/lead" is the root named
//     lead even when other agents are also named lead;
//  2. a bare name, which must match exactly one agent anywhere in the tree
//     (otherwise ErrAmbiguous, listing the matching paths in the "/lead/worker"
//     form, each of which resolves);
//  3. an agent id, 32 hex or dashed UUID form.
//
// Names win over ids: a bare name that happens to look like an id resolves
// as a name when an agent has it.
//
// Lookup is the tool-side resolution: only agents one hop away from the
// caller (parent, then children, then siblings) are found by name.
//
// # Routing
//
// CheckRoute implements SPEC 6: an agent may message its parent, its children
// and its siblings (agents with the same parent; roots have no routing
// siblings). Only root agents may message USER. The sentinel senders SYSTEM
// and USER bypass the one-hop rule. Nobody can message itself or SYSTEM.
// Violations wrap ErrRoute and name the rule that was broken.
package tree
