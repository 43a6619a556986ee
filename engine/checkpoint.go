package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	fold "github.com/warren-dev/warren/projection"
)

// Checkpoints (see doc.go, "Checkpoints"): the projection of a log up to a
// line, so that recovery folds only the lines written since.

// checkpointName is the checkpoint file in an agent directory.
const checkpointName = "checkpoint.json"

const checkpointVersion = 2

// DefaultCheckpointEvery is the default CoreOptions.CheckpointEvery.
const DefaultCheckpointEvery = 256

// checkpointHead is the first line of checkpoint.json; the state (JSON)
// and the enqueued ids (hex) follow on a line each, and Sum covers both.
type checkpointHead struct {
	Version int    `json:"version"`
	Seq     uint64 `json:"seq"`
	Off     int64  `json:"off"`
	CRC     string `json:"crc"`
	Sum     string `json:"sum"`
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

func hex32(v uint32) string { return fmt.Sprintf("%08x", v) }

// readCheckpoint reads an agent's checkpoint: the projection at its line,
// the resume point, or an error (no file, damaged, another version).
func (c *Core) readCheckpoint(id string) (*projection, eventlog.Resume, error) {
	var r eventlog.Resume
	data, err := faultfs.ReadFile(c.fs, filepath.Join(c.agentDir(id), checkpointName))
	if err != nil {
		return nil, r, err
	}
	headLine, body, ok := bytes.Cut(data, []byte{'\n'})
	if !ok {
		return nil, r, errors.New("checkpoint has no header line")
	}
	var doc checkpointHead
	if err := json.Unmarshal(headLine, &doc); err != nil {
		return nil, r, fmt.Errorf("checkpoint header is not JSON: %w", err)
	}
	if doc.Version != checkpointVersion {
		return nil, r, fmt.Errorf("checkpoint version %d, this daemon reads %d", doc.Version, checkpointVersion)
	}
	if hex32(crc32.Checksum(body, crcTable)) != doc.Sum {
		return nil, r, errors.New("checkpoint state fails its checksum")
	}
	crc, err := strconv.ParseUint(doc.CRC, 16, 32)
	if err != nil || len(doc.CRC) != 8 || doc.Seq == 0 || doc.Off < 0 {
		return nil, r, errors.New("checkpoint names no valid line")
	}
	p, err := fold.DecodeState(body)
	if err != nil {
		return nil, r, fmt.Errorf("checkpoint state: %w", err)
	}
	if !p.Created || p.LastSeq != doc.Seq || p.LastOff != doc.Off {
		return nil, r, errors.New("checkpoint state does not match its line")
	}
	return p, eventlog.Resume{Seq: doc.Seq, Off: doc.Off, CRC: uint32(crc)}, nil
}

// writeCheckpoint writes the agent's checkpoint when its log has grown by
// at least min entries since the last one. It is an optimisation: a
// checkpoint that is lost, stale or torn makes recovery fold the whole log,
// so it is written without fsync (temp file and rename). On a cluster
// store none is written: its line is checked in the local file, which a
// cluster home does not have, and the agent may be recovered by another
// daemon, in another home (recovery there folds the whole log).
func (c *Core) writeCheckpoint(a *agent, min uint64) {
	if c.clustered() {
		return
	}
	a.ckptMu.Lock()
	defer a.ckptMu.Unlock()
	a.mu.Lock()
	p := a.p
	if a.corrupt != nil || a.log == nil || p.Replaying() || !p.Created || p.Terminated || p.LastSeq == 0 ||
		p.LastOff < 0 || p.LastSeq < a.ckptSeq+min {
		a.mu.Unlock()
		return
	}
	seq, off := p.LastSeq, p.LastOff
	state, err := p.EncodeState()
	a.mu.Unlock()
	if err != nil {
		c.log.Debug("no checkpoint for now", "agent", a.id, "err", err)
		return
	}
	c.ckptSlots <- struct{}{}
	defer func() { <-c.ckptSlots }()
	r, err := eventlog.ResumeAt(c.fs, c.logPath(a.id), seq, off)
	if err != nil {
		c.log.Warn("no checkpoint: its line does not check out", "agent", a.id, "seq", seq, "err", err)
		return
	}
	head, err := json.Marshal(checkpointHead{Version: checkpointVersion, Seq: seq, Off: off, CRC: hex32(r.CRC),
		Sum: hex32(crc32.Checksum(state, crcTable))})
	data := append(append(head, '\n'), state...)
	if err == nil {
		err = writeUnsynced(c.fs, filepath.Join(c.agentDir(a.id), checkpointName), data)
	}
	if err != nil {
		c.log.Warn("writing a checkpoint", "agent", a.id, "err", err)
		return
	}
	a.ckptSeq = seq
}

// checkpointMin is how many entries an agent's log must have grown by
// since its checkpoint for the background writer to write a new one:
// CheckpointEvery while it runs a turn, any once it is at rest. A kill -9
// then leaves lines to fold after the checkpoints only in the logs of the
// agents that were busy (or whose writer had not run yet), not up to
// CheckpointEvery-1 in every log.
func (c *Core) checkpointMin(a *agent, every int) uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.busy {
		return uint64(every)
	}
	return 1
}

// removeCheckpoint removes an agent's checkpoint (its log failed a check).
func (c *Core) removeCheckpoint(id string) {
	err := c.fs.Remove(filepath.Join(c.agentDir(id), checkpointName))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		c.log.Warn("removing a checkpoint", "agent", id, "err", err)
	}
}

// writeUnsynced replaces path with data through a temp file and a rename,
// without fsync: after a crash the file is the old one, the new one, or
// damaged (which its checksum shows).
func writeUnsynced(fsys faultfs.FS, path string, data []byte) error {
	tmp := path + ".tmp-" + newID()[:12]
	f, err := fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	n, err := f.Write(data)
	if err == nil && n != len(data) {
		err = fmt.Errorf("wrote %d of %d bytes", n, len(data))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, path)
	}
	if err != nil {
		_ = fsys.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// checkpointAll writes the checkpoint of every agent whose log grew by at
// least min entries since its last one, until Close begins (Close writes
// its own).
func (c *Core) checkpointAll(min uint64) {
	c.mu.Lock()
	agents := make([]*agent, 0, len(c.agents))
	for _, a := range c.agents {
		agents = append(agents, a)
	}
	c.mu.Unlock()
	c.checkpointAgents(agents, min, true)
}

// checkpointAgents writes the checkpoints of agents whose logs grew by at
// least min entries; untilStop stops it when Close begins.
func (c *Core) checkpointAgents(agents []*agent, min uint64, untilStop bool) {
	for _, a := range agents {
		if untilStop && c.stopping() {
			return
		}
		c.writeCheckpoint(a, min)
	}
}
