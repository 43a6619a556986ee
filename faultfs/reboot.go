package faultfs

import (
	"bytes"
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
	// UnsyncedEntries is the probability, from 0 (the default) to 1, that
	// each directory entry created, removed or replaced since its
	// directory's last sync still takes effect after a power loss, as real
	// filesystems often persist metadata early. The entry's file keeps only
	// its synced data (plus the tail). With 1, every rename, create and
	// remove survives, which exposes renaming a file before fsyncing it.
	UnsyncedEntries float64
	// Rand drives the tail and entry choices; nil uses a fixed seed, so a
	// run is deterministic either way.
	Rand *rand.Rand
}

// Reboot brings a crashed filesystem back (crashing it first if it is not
// crashed). Every File opened before is dead: its operations return
// ErrCrashed. Armed crashes are disarmed; injected rules stay.
//
// With PowerLoss, a file keeps its synced data; if its visible data was
// longer, the Tail mode decides how much of the excess survives: at most as
// many bytes as the excess, so a file never grows beyond what was written.
// Only synced directory entries survive, unless UnsyncedEntries says
// otherwise. With ProcessCrash every completed
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
		pl := &powerLoss{memo: map[*node]*node{}, tail: opts.Tail,
			entries: opts.UnsyncedEntries, rng: rng}
		m.root = pl.rebuild(m.root)
	}
	// A dropped write's pending report ends with the process that was
	// told of the failure (a simplification: Linux may report it to the
	// first fsync of a new open too).
	m.root.walkTree(func(n *node) { n.lostWrite = false })
	m.gen++
	m.crashed = false
	m.crashAt = 0
	m.inflight = nil
}

// powerLoss holds the state of one power-loss rebuild.
type powerLoss struct {
	memo    map[*node]*node // old node -> new node, so shared nodes stay shared
	tail    TailMode
	entries float64
	rng     *rand.Rand
}

// rebuild builds the post-power-loss copy of n: synced entries (and the
// unsynced entry changes chosen to survive) and synced data, plus the chosen
// tail. Every surviving byte and entry is then on disk, so the copy's synced
// state equals its visible state.
func (pl *powerLoss) rebuild(n *node) *node {
	if c, ok := pl.memo[n]; ok {
		return c
	}
	if n.dir {
		c := newDir(n.perm, n.mtime)
		pl.memo[n] = c
		names := slices.Collect(maps.Keys(n.syncedChildren))
		for name := range n.children {
			if _, ok := n.syncedChildren[name]; !ok {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		for _, name := range names {
			s, sok := n.syncedChildren[name]
			v, vok := n.children[name]
			if s != v && pl.entries > 0 && pl.rng.Float64() < pl.entries {
				s, sok = v, vok // this unsynced change reached the disk
			}
			if sok {
				c.children[name] = pl.rebuild(s)
			}
		}
		c.syncedChildren = maps.Clone(c.children)
		return c
	}
	if n.link != "" {
		c := &node{link: n.link, perm: n.perm, mtime: n.mtime}
		pl.memo[n] = c
		return c
	}
	c := newFile(n.perm, n.mtime)
	pl.memo[n] = c
	// Synced bytes are never written in place (see node.writeAt), so the
	// new node can share them; appending a tail reallocates (capped slice).
	data := n.synced[:len(n.synced):len(n.synced)]
	if over := min(len(n.data), len(n.synced)); pl.tail != TailNone && over > 0 &&
		!bytes.Equal(n.data[:over], n.synced[:over]) {
		data = tearOverwrite(n.synced, n.data[:over], pl.tail, pl.rng)
	}
	if len(n.data) > len(n.synced) {
		data = append(data, tailBytes(n.data[len(n.synced):], pl.tail, pl.rng)...)
	}
	c.data = data
	c.sync()
	return c
}

// TearUnit is the granularity at which a power loss tears an unsynced
// overwrite of durable bytes: each unit lands whole or not at all (or, per the
// Tail mode, as zeros or garbage). It is far smaller than a disk sector, so
// the model is stricter than real hardware.
const TearUnit = 32

// tearOverwrite returns the durable bytes old after a power loss hit an
// unsynced overwrite of its first len(cur) bytes with cur: unit by unit,
// each differing unit keeps the old bytes or takes the new ones (TailPrefix),
// or also becomes zeros (TailZero) or random bytes (TailGarbage).
func tearOverwrite(old, cur []byte, tail TailMode, rng *rand.Rand) []byte {
	out := slices.Clone(old)
	for u := 0; u < len(cur); u += TearUnit {
		end := min(u+TearUnit, len(cur))
		if bytes.Equal(old[u:end], cur[u:end]) {
			continue
		}
		switch c := rng.IntN(4); {
		case c < 2:
			copy(out[u:end], cur[u:end])
		case c == 2 && tail == TailZero:
			clear(out[u:end])
		case c == 2 && tail == TailGarbage:
			for i := u; i < end; i++ {
				out[i] = byte(rng.Uint32())
			}
		}
	}
	return out
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
