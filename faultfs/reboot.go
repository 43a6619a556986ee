package faultfs

import (
	"maps"
	"math/rand/v2"
	"slices"
)

// RebootMode says what a crash destroyed.
type RebootMode int

const (
	// PowerLoss keeps only synced file data and synced directory entries
	// (plus, per the Tail mode, part of the unsynced appended data).
	PowerLoss RebootMode = iota
	// ProcessCrash keeps everything written (the page cache survives). What
	// was not synced is still not durable: a later PowerLoss loses it.
	ProcessCrash
)

// TailMode decides what a crash leaves of data that was not yet durable.
type TailMode int

const (
	// TailNone: nothing unsynced survives a power loss, and a write torn by
	// the crash leaves nothing.
	TailNone TailMode = iota
	// TailPrefix: a random prefix of each file's unsynced appended data
	// survives a power loss (and of a torn write, on either mode).
	TailPrefix
	// TailZero: on power loss a random prefix of the unsynced appended data
	// followed by zeros; on process crash like TailPrefix.
	TailZero
	// TailGarbage: on power loss a random prefix of the unsynced appended
	// data followed by random bytes; on process crash like TailPrefix.
	TailGarbage
)

// RebootOptions configures Mem.Reboot. The zero value is a power loss that
// keeps exactly what was synced.
type RebootOptions struct {
	Mode RebootMode
	Tail TailMode
	// Rand drives the tail choices; nil uses a fixed seed, so a run is
	// deterministic either way.
	Rand *rand.Rand
}

// Reboot brings a crashed filesystem back (crashing it first if it is not
// crashed). Every File opened before is dead: its operations return
// ErrCrashed. Armed crashes are disarmed; injected rules stay.
//
// With PowerLoss, a file keeps its synced data; if its visible data was
// longer, the Tail mode decides how much of the excess survives: at most as
// many bytes as the excess, so a file never grows beyond what was written.
// Only synced directory entries survive. With ProcessCrash every completed
// operation survives. In both modes a write interrupted by CrashAt lands
// partly per the Tail mode (TailNone: not at all).
func (m *Mem) Reboot(opts RebootOptions) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rng := opts.Rand
	if rng == nil {
		rng = rand.New(rand.NewPCG(1, 2))
	}
	if w := m.inflight; w != nil {
		switch opts.Mode {
		case ProcessCrash:
			if opts.Tail != TailNone {
				w.n.writeAt(w.data[:rng.IntN(len(w.data)+1)], w.off)
			}
		default:
			// The whole write may have reached the page cache; the tail
			// rule below decides what reached the disk.
			w.n.writeAt(w.data, w.off)
		}
	}
	if opts.Mode != ProcessCrash {
		memo := map[*node]*node{}
		m.root = rebuildSynced(m.root, memo, opts.Tail, rng)
	}
	m.gen++
	m.crashed = false
	m.crashAt = 0
	m.inflight = nil
}

// rebuildSynced builds the post-power-loss copy of n: synced entries and synced
// data, plus the chosen tail. Every surviving byte is then on disk, so the
// copy's synced state equals its visible state.
func rebuildSynced(n *node, memo map[*node]*node, tail TailMode, rng *rand.Rand) *node {
	if c, ok := memo[n]; ok {
		return c
	}
	if n.dir {
		c := newDir(n.perm, n.mtime)
		memo[n] = c
		for _, name := range slices.Sorted(maps.Keys(n.syncedChildren)) {
			c.children[name] = rebuildSynced(n.syncedChildren[name], memo, tail, rng)
		}
		c.syncedChildren = maps.Clone(c.children)
		return c
	}
	c := newFile(n.perm, n.mtime)
	memo[n] = c
	// Synced bytes are never written in place (see node.writeAt), so the
	// new node can share them; appending a tail reallocates (capped slice).
	data := n.synced[:len(n.synced):len(n.synced)]
	if len(n.data) > len(n.synced) {
		data = append(data, tailBytes(n.data[len(n.synced):], tail, rng)...)
	}
	c.data = data
	c.sync()
	return c
}

// tailBytes returns what survives of the unsynced extension ext: never more
// than len(ext) bytes.
func tailBytes(ext []byte, tail TailMode, rng *rand.Rand) []byte {
	l := len(ext)
	switch tail {
	case TailPrefix:
		return slices.Clone(ext[:rng.IntN(l+1)])
	case TailZero:
		p := rng.IntN(l + 1)
		z := rng.IntN(l - p + 1)
		return append(slices.Clone(ext[:p]), make([]byte, z)...)
	case TailGarbage:
		p := rng.IntN(l + 1)
		g := rng.IntN(l - p + 1)
		out := append(slices.Clone(ext[:p]), make([]byte, g)...)
		garbage := out[p:]
		for i := 0; i < len(garbage); i += 8 {
			v := rng.Uint64()
			for j := i; j < min(i+8, len(garbage)); j++ {
				garbage[j] = byte(v >> (8 * (j - i)))
			}
		}
		return out
	}
	return nil
}
