package checkpoint

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/projection"
)

// Name is the checkpoint file in an agent directory.
const Name = "checkpoint.json"

// Version is the format version this code reads and writes.
const Version = 4

// checkpointHead is the first line of checkpoint.json; the state (JSON)
// and the enqueued ids (hex) follow on a line each, and Sum covers both.
type header struct {
	Version int    `json:"version"`
	Seq     uint64 `json:"seq"`
	Off     int64  `json:"off"`
	CRC     string `json:"crc"`
	// Len is the line's length with its newline (absent from checkpoints
	// written before it was recorded).
	Len int64  `json:"len,omitempty"`
	Sum string `json:"sum"`
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

func hex32(v uint32) string { return fmt.Sprintf("%08x", v) }

// Decode decodes a checkpoint's bytes: the projection at its line and
// the resume point of the log after it, or an error (damaged, another
// version, a state that does not match its line).
func Decode(data []byte) (*projection.State, eventlog.Resume, error) {
	var r eventlog.Resume
	headLine, body, ok := bytes.Cut(data, []byte{'\n'})
	if !ok {
		return nil, r, errors.New("checkpoint has no header line")
	}
	var doc header
	if err := json.Unmarshal(headLine, &doc); err != nil {
		return nil, r, fmt.Errorf("checkpoint header is not JSON: %w", err)
	}
	if doc.Version != Version {
		return nil, r, fmt.Errorf("checkpoint version %d, this daemon reads %d", doc.Version, Version)
	}
	if hex32(crc32.Checksum(body, crcTable)) != doc.Sum {
		return nil, r, errors.New("checkpoint state fails its checksum")
	}
	crc, err := strconv.ParseUint(doc.CRC, 16, 32)
	if err != nil || len(doc.CRC) != 8 || doc.Seq == 0 || doc.Off < 0 || doc.Len < 0 {
		return nil, r, errors.New("checkpoint names no valid line")
	}
	p, err := projection.DecodeState(body)
	if err != nil {
		return nil, r, fmt.Errorf("checkpoint state: %w", err)
	}
	if !p.Created || p.LastSeq != doc.Seq || p.LastOff != doc.Off {
		return nil, r, errors.New("checkpoint state does not match its line")
	}
	return p, eventlog.Resume{Seq: doc.Seq, Off: doc.Off, CRC: uint32(crc), Len: doc.Len}, nil
}

// WriteData replaces the checkpoint in an agent directory with data (an
// Encode). It is not synced: a checkpoint is an optimisation, and one lost
// or torn by a crash costs a full fold (its checksum shows the damage).
func WriteData(fsys faultfs.FS, dir string, data []byte) error {
	return writeUnsynced(fsys, filepath.Join(dir, Name), data)
}

// Encode is the checkpoint file of state at line r.
func Encode(state []byte, r eventlog.Resume) []byte {
	head, _ := json.Marshal(header{Version: Version, Seq: r.Seq, Off: r.Off, CRC: hex32(r.CRC), Len: r.Len,
		Sum: hex32(crc32.Checksum(state, crcTable))})
	return append(append(head, '\n'), state...)
}

// writeUnsynced replaces path with data through a temp file and a rename,
// without fsync: after a crash the file is the old one, the new one, or
// damaged (which its checksum shows).
func writeUnsynced(fsys faultfs.FS, path string, data []byte) error {
	tmp := path + ".tmp-" + randomSuffix()
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

// randomSuffix names a temp file uniquely.
func randomSuffix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
