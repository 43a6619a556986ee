//go:build linux

package eventlog

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkCeiling64On64 is the ceiling the disk sets for 64 writers on 64
// logs, measured beside BenchmarkAppend64WritersOn64LogsSyncer: not the
// package's code but the least any writer can do, on bare files with a
// flusher that has no bookkeeping. Each of 64 writers appends a 200-byte
// line to its own file in a closed loop, and every flush it needs goes to
// one shared flusher, which takes everything asked while its last flush
// ran and does one syncfs(2) for it (one fsync when only one is waiting):
// the best sharing measured on ext4 here, ahead of fsyncs or fdatasyncs
// issued in parallel and of O_DSYNC writes (docs/DECISIONS.md, "Why not
// 15x").
//
//   - flushes=2 is SPEC 3's write path: the line is written in place at
//     the start of the writer's pending file and flushed, then appended to
//     its log and flushed, in that order, before the next.
//   - flushes=1 is the log's flush alone: the most any design can reach
//     that makes each entry durable in its own log before acknowledging it
//     (issue 38's own condition), with or without a write-ahead file.
func BenchmarkCeiling64On64(b *testing.B) {
	for _, flushes := range []int{2, 1} {
		b.Run("flushes="+strconv.Itoa(flushes), func(b *testing.B) { benchCeiling(b, 64, flushes) })
	}
}

// ceilingFlusher is the model's shared flusher: a flush covers every
// request made while the previous one ran.
type ceilingFlusher struct {
	fsfd int
	reqs chan ceilingReq

	flushes, asked atomic.Int64
}

type ceilingReq struct {
	f    *os.File
	done chan error
}

func (c *ceilingFlusher) run() {
	for r := range c.reqs {
		batch := []ceilingReq{r}
	drain:
		for {
			select {
			case r := <-c.reqs:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		var err error
		if len(batch) == 1 {
			err = batch[0].f.Sync()
		} else {
			err = unix.Syncfs(c.fsfd)
		}
		c.flushes.Add(1)
		c.asked.Add(int64(len(batch)))
		for _, r := range batch {
			r.done <- err
		}
	}
}

func (c *ceilingFlusher) sync(f *os.File, done chan error) error {
	c.reqs <- ceilingReq{f: f, done: done}
	return <-done
}

func benchCeiling(b *testing.B, writers, flushes int) {
	dir := benchDir(b)
	rawBefore := rawFsyncRate(b, dir, 0, 500*time.Millisecond)
	fsfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(fsfd)
	c := &ceilingFlusher{fsfd: fsfd, reqs: make(chan ceilingReq, writers)}
	go c.run()
	defer close(c.reqs)

	line := make([]byte, 200)
	line[len(line)-1] = '\n'
	logs, pendings := make([]*os.File, writers), make([]*os.File, writers)
	for w := range writers {
		sub := filepath.Join(dir, "agents", strconv.Itoa(w))
		if err := os.MkdirAll(sub, 0o700); err != nil {
			b.Fatal(err)
		}
		if logs[w], err = os.OpenFile(filepath.Join(sub, "events.jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err != nil {
			b.Fatal(err)
		}
		defer logs[w].Close()
		if pendings[w], err = os.OpenFile(filepath.Join(sub, "events.pending"), os.O_CREATE|os.O_WRONLY, 0o600); err != nil {
			b.Fatal(err)
		}
		defer pendings[w].Close()
	}
	// One round untimed: every file's first write and directory entry.
	unix.Sync()

	dones := make([]chan error, writers)
	for w := range dones {
		dones[w] = make(chan error, 1)
	}
	elapsed := runWriters(b, writers, func(w int, _ int64) error {
		return ceilingAppend(c, pendings[w], logs[w], line, flushes, dones[w])
	})
	reportVsRaw(b, dir, rawBefore, elapsed)
	b.ReportMetric(float64(c.asked.Load())/float64(max(c.flushes.Load(), 1)), "fsyncs/flush")
}

// ceilingAppend is one append of the model: with flushes 2, the pending
// file's write and flush first.
func ceilingAppend(c *ceilingFlusher, pending, log *os.File, line []byte, flushes int, done chan error) error {
	if flushes == 2 {
		if _, err := pending.WriteAt(line, 0); err != nil {
			return err
		}
		if err := c.sync(pending, done); err != nil {
			return fmt.Errorf("flush %s: %w", pending.Name(), err)
		}
	}
	if _, err := log.Write(line); err != nil {
		return err
	}
	if err := c.sync(log, done); err != nil {
		return fmt.Errorf("flush %s: %w", log.Name(), err)
	}
	return nil
}
