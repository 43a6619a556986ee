package eventlog

import (
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warren-dev/warren/faultfs"
)

// benchDir is a directory on the same filesystem as the repository (the
// package directory), since os.TempDir may be a tmpfs where fsync is free.
func benchDir(b *testing.B) string {
	b.Helper()
	dir, err := os.MkdirTemp(".", ".bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	abs, err := filepath.Abs(dir)
	if err != nil {
		b.Fatal(err)
	}
	return abs
}

var benchData = map[string]any{
	"run_id": "0123456789abcdef0123456789abcdef", "turn": 3,
	"prompt": "summarise the findings of the previous turn in three sentences",
}

// rawFsyncRate measures write(200-byte line)+fsync per second on a new
// file in dir, for ops operations, or for at least minDur when ops is 0.
func rawFsyncRate(b *testing.B, dir string, ops int, minDur time.Duration) float64 {
	b.Helper()
	f, err := os.CreateTemp(dir, "raw-")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	line := make([]byte, 200)
	line[len(line)-1] = '\n'
	start := time.Now()
	n := 0
	for ; (ops > 0 && n < ops) || (ops == 0 && time.Since(start) < minDur); n++ {
		if _, err := f.Write(line); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
	}
	return float64(n) / time.Since(start).Seconds()
}

// BenchmarkRawWriteFsync is the disk's write+fsync rate: the yardstick.
func BenchmarkRawWriteFsync(b *testing.B) {
	dir := benchDir(b)
	b.ResetTimer()
	rate := rawFsyncRate(b, dir, b.N, 0)
	b.ReportMetric(rate, "fsyncs/s")
}

// benchAppends runs b.N durable appends spread over writers goroutines on
// nlogs logs (writer w uses log w % nlogs), and reports appends/s next to
// the raw write+fsync rate measured on the same disk in the same run.
func benchAppends(b *testing.B, writers, nlogs int) {
	benchAppendsOpts(b, writers, nlogs, Options{}, false)
}

// benchAppendsSyncer is benchAppends with the logs sharing a Syncer.
func benchAppendsSyncer(b *testing.B, writers, nlogs int) {
	benchAppendsOpts(b, writers, nlogs, Options{Syncer: NewSyncer(faultfs.OS{})}, false)
}

// benchAppendsOpts is benchAppends with the logs opened with opts (Files,
// Syncer); with spread, every append goes to the next log in turn instead
// of the writer's own.
func benchAppendsOpts(b *testing.B, writers, nlogs int, opts Options, spread bool) {
	dir := benchDir(b)
	// The disk's rate drifts; measure it just before and just after the
	// appends, on the same filesystem, and use the mean.
	rawBefore := rawFsyncRate(b, dir, 0, 500*time.Millisecond)
	logs := make([]*Log, nlogs)
	var groups atomic.Int64
	opts.OnAppend = func([]Entry) { groups.Add(1) }
	for i := range logs {
		l, err := Open(faultfs.OS{}, filepath.Join(dir, "agents", strconv.Itoa(i), "events.jsonl"), opts)
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		logs[i] = l
	}
	elapsed := runWriters(b, writers, func(w int, n int64) error {
		l := logs[w%nlogs]
		if spread {
			l = logs[n%int64(nlogs)]
		}
		_, err := l.Append("turn.start", benchData)
		return err
	})
	reportVsRaw(b, dir, rawBefore, elapsed)
	b.ReportMetric(float64(b.N)/float64(groups.Load()), "entries/group")
	if opts.Syncer != nil {
		flushes, asked := opts.Syncer.Stats()
		b.ReportMetric(float64(asked)/float64(flushes), "fsyncs/flush")
	}
}

// runWriters resets the timer and runs b.N operations spread over writers
// goroutines: op(w, n) is the n-th (from 1), run by writer w; a failed
// operation stops its writer. It returns the time they took.
func runWriters(b *testing.B, writers int, op func(w int, n int64) error) time.Duration {
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := next.Add(1); n <= int64(b.N); n = next.Add(1) {
				if err := op(w, n); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start)
}

// reportVsRaw stops the timer and reports b.N appends in elapsed next to
// the raw fsync rate: the mean of rawBefore and a measurement made now.
func reportVsRaw(b *testing.B, dir string, rawBefore float64, elapsed time.Duration) {
	b.StopTimer()
	raw := (rawBefore + rawFsyncRate(b, dir, 0, 500*time.Millisecond)) / 2
	rate := float64(b.N) / elapsed.Seconds()
	b.ReportMetric(rate, "appends/s")
	b.ReportMetric(raw, "raw_fsyncs/s")
	b.ReportMetric(rate/raw, "ratio_vs_raw_fsync")
}

func BenchmarkAppend1Writer(b *testing.B)           { benchAppends(b, 1, 1) }
func BenchmarkAppend64WritersOneLog(b *testing.B)   { benchAppends(b, 64, 1) }
func BenchmarkAppend64WritersOn64Logs(b *testing.B) { benchAppends(b, 64, 64) }

// The same three through a Syncer, as the daemon runs them: the fsyncs of
// different logs share flushes.
func BenchmarkAppend1WriterSyncer(b *testing.B)           { benchAppendsSyncer(b, 1, 1) }
func BenchmarkAppend64WritersOneLogSyncer(b *testing.B)   { benchAppendsSyncer(b, 64, 1) }
func BenchmarkAppend64WritersOn64LogsSyncer(b *testing.B) { benchAppendsSyncer(b, 64, 64) }

// The handle cap (Files): under it (no reopen, only the LRU bookkeeping),
// and one writer going round 256 logs with room for 16, so that every
// append closes another log's handles and reopens its own.
func BenchmarkAppend64WritersOn64LogsCap512(b *testing.B) {
	benchAppendsOpts(b, 64, 64, Options{Files: NewFiles(512)}, false)
}
func BenchmarkAppendRoundRobin256LogsCap16(b *testing.B) {
	benchAppendsOpts(b, 1, 256, Options{Files: NewFiles(16)}, true)
}
func BenchmarkAppendRoundRobin256LogsNoCap(b *testing.B) {
	benchAppendsOpts(b, 1, 256, Options{}, true)
}

// BenchmarkLiteralSpecWritePath is the write path as SPEC 3 words it, for
// comparison with BenchmarkAppend1Writer: per entry, create events.pending,
// write, fsync, append to the log, fsync, remove the pending file. It is
// what the in-place pending rewrite (docs/DECISIONS.md) is measured against.
func BenchmarkLiteralSpecWritePath(b *testing.B) {
	dir := benchDir(b)
	rawBefore := rawFsyncRate(b, dir, 0, 500*time.Millisecond)
	lg, err := os.OpenFile(filepath.Join(dir, "events.jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer lg.Close()
	pending := filepath.Join(dir, "events.pending")
	line := make([]byte, 200)
	line[len(line)-1] = '\n'
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		pf, err := os.OpenFile(pending, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := pf.Write(line); err != nil {
			b.Fatal(err)
		}
		if err := pf.Sync(); err != nil {
			b.Fatal(err)
		}
		if err := pf.Close(); err != nil {
			b.Fatal(err)
		}
		if _, err := lg.Write(line); err != nil {
			b.Fatal(err)
		}
		if err := lg.Sync(); err != nil {
			b.Fatal(err)
		}
		if err := os.Remove(pending); err != nil {
			b.Fatal(err)
		}
	}
	reportVsRaw(b, dir, rawBefore, time.Since(start))
}

// BenchmarkAppendAfterIdle is an append to a log that has been idle past
// PendingIdle, so the pending file is created again (and its directory
// entry made durable) for each entry: the cost of sparse appends.
func BenchmarkAppendAfterIdle(b *testing.B) {
	dir := benchDir(b)
	rawBefore := rawFsyncRate(b, dir, 0, 500*time.Millisecond)
	l, err := Open(faultfs.OS{}, filepath.Join(dir, "events.jsonl"), Options{PendingIdle: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if _, err := l.Append("turn.start", benchData); err != nil {
			b.Fatal(err)
		}
		retireNow(l)
	}
	reportVsRaw(b, dir, rawBefore, time.Since(start))
}

// A small team: 4 agents on 4 logs, without and with a Syncer.
func BenchmarkAppend4WritersOn4Logs(b *testing.B)       { benchAppends(b, 4, 4) }
func BenchmarkAppend4WritersOn4LogsSyncer(b *testing.B) { benchAppendsSyncer(b, 4, 4) }
