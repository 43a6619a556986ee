//go:build linux

package eventlog

import (
	"io/fs"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/warren-dev/warren/faultfs"
)

// devFS puts the files under mount on another device (faultfs.Device of
// their Stat) and counts OpenFS calls by directory: two filesystems in one
// Mem.
type devFS struct {
	faultfs.FS
	mount string
	mu    sync.Mutex
	opens []string
}

func (d *devFS) OpenFile(name string, flag int, perm fs.FileMode) (faultfs.File, error) {
	f, err := d.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	dev := uint64(1)
	if strings.HasPrefix(name, d.mount) {
		dev = 2
	}
	return devFile{File: f, dev: dev}, nil
}

func (d *devFS) OpenFS(name string) (faultfs.FileSystem, error) {
	d.mu.Lock()
	d.opens = append(d.opens, name)
	d.mu.Unlock()
	return d.FS.OpenFS(name)
}

type devFile struct {
	faultfs.File
	dev uint64
}

func (f devFile) Stat() (fs.FileInfo, error) {
	fi, err := f.File.Stat()
	if err != nil {
		return nil, err
	}
	return devInfo{FileInfo: fi, st: &syscall.Stat_t{Dev: f.dev}}, nil
}

type devInfo struct {
	fs.FileInfo
	st *syscall.Stat_t
}

func (i devInfo) Sys() any { return i.st }

// TestSyncerLanesPerFilesystem: logs on two filesystems get a lane each
// (one FileSystem opened on each), and a flush of one never stands for an
// fsync of the other: with one log per filesystem appending at once, no
// flush stands for two fsyncs.
func TestSyncerLanesPerFilesystem(t *testing.T) {
	m := faultfs.NewMem()
	homeExists(t, m)
	d := &devFS{FS: m, mount: "home/agents/s1"}
	sy := NewSyncer(d)
	paths := syncerPaths(2)
	logs := make([]*Log, 2)
	for i, p := range paths {
		logs[i] = mustOpenOpts(t, d, p, Options{PendingIdle: -1, Syncer: sy})
		defer logs[i].Close()
	}
	var wg sync.WaitGroup
	for i := range logs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; n < 20; n++ {
				if _, err := logs[i].Append("test.event", map[string]any{"id": n}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if len(d.opens) != 2 || d.opens[0] == d.opens[1] {
		t.Fatalf("OpenFS on %v; want one per filesystem", d.opens)
	}
	if flushes, asked := sy.Stats(); flushes != asked {
		t.Fatalf("%d flushes for %d fsyncs: a flush of one filesystem stood for the other's fsync", flushes, asked)
	}
	if _, ok := sy.lanes[1]; !ok {
		t.Fatal("no lane for device 1")
	}
	if _, ok := sy.lanes[2]; !ok {
		t.Fatal("no lane for device 2")
	}
}
