package engine

// Where recovery's CPU goes, per event, on one generated agent log (1,000
// events, in memory, so only CPU is measured):
//
//	go test -run '^$' -bench 'BenchmarkRecoveryParts' ./engine/
//
// framing/eventlog: eventlog.ReadAll (CRC check, positional parse of the
// writer's layout, a copy of each entry's data). framing/open-replay:
// eventlog.Open with a Replay that borrows each entry (what recovery does).
// framing/positional: a prototype that checks the CRC and then reads seq,
// ts and event by position. fold/projection and fold/<event>: apply over
// entries already parsed, in the live mode (each message decoded into the
// inbox as it is enqueued); fold/replay and replay/<event>: in recovery's
// replay mode (beginReplay, apply, endReplay: messages kept raw, decoded
// only if still pending at the end). Multiply ns/event by 1e6 for the CPU
// cost of the 1,000 x 1,000 home.

import (
	"bytes"
	"encoding/json"
	"errors"
	"hash/crc32"
	"path/filepath"
	"strconv"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
)

func BenchmarkRecoveryParts(b *testing.B) {
	fsys := faultfs.NewMem()
	spec := homeSpec{Agents: 2, EventsPerAgent: 1000, GroupSize: 2}
	if _, err := genHome(fsys, "/home", spec); err != nil {
		b.Fatal(err)
	}
	path := filepath.Join("/home/agents", genAgentID(1), "events.jsonl")
	data, err := faultfs.ReadFile(fsys, path)
	if err != nil {
		b.Fatal(err)
	}
	entries, err := eventlog.ReadAll(fsys, path)
	if err != nil {
		b.Fatal(err)
	}
	// measure runs body b.N times and reports wall and CPU time (of the
	// whole process, GC included) per event: the CPU figure holds on a
	// machine other work keeps busy.
	measure := func(b *testing.B, events int, body func()) {
		cpu0 := cpuTime()
		for b.Loop() {
			body()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*events), "ns/event")
		b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N*events), "cpu_ns/event")
	}
	b.Run("framing/eventlog", func(b *testing.B) {
		measure(b, len(entries), func() {
			if _, err := eventlog.ReadAll(fsys, path); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("framing/open-replay", func(b *testing.B) {
		measure(b, len(entries), func() {
			n := 0
			lg, err := eventlog.Open(fsys, path, eventlog.Options{MustExist: true, ReplayBorrows: true,
				Replay: func(eventlog.Entry) error { n++; return nil }})
			if err != nil || n != len(entries) {
				b.Fatalf("Open: %d entries, %v; want %d", n, err, len(entries))
			}
			lg.Close()
		})
	})
	b.Run("framing/positional", func(b *testing.B) {
		measure(b, len(entries), func() {
			n, err := parsePositional(data)
			if err != nil || n != len(entries) {
				b.Fatalf("positional parse: %d entries, %v; want %d", n, err, len(entries))
			}
		})
	})
	b.Run("fold/projection", func(b *testing.B) {
		measure(b, len(entries), func() {
			p := newProjection()
			for _, e := range entries {
				if err := p.Apply(e); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("fold/replay", func(b *testing.B) {
		measure(b, len(entries), func() {
			p := newProjection()
			p.BeginReplay(nil)
			for _, e := range entries {
				if err := p.Apply(e); err != nil {
					b.Fatal(err)
				}
			}
			if err := p.EndReplay(nil); err != nil {
				b.Fatal(err)
			}
		})
	})
	// The fold by event type: each event type's entries applied alone, in
	// order, to a fresh projection; ns/event is per entry of that type and
	// events/log how many a log holds.
	byType := map[string][]eventlog.Entry{}
	var types []string
	for _, e := range entries {
		if byType[e.Event] == nil {
			types = append(types, e.Event)
		}
		byType[e.Event] = append(byType[e.Event], e)
	}
	for _, typ := range types {
		es := byType[typ]
		b.Run("fold/"+typ, func(b *testing.B) {
			measure(b, len(es), func() {
				p := newProjection()
				for _, e := range es {
					_ = p.Apply(e)
				}
			})
			b.ReportMetric(float64(len(es)), "events/log")
		})
		b.Run("replay/"+typ, func(b *testing.B) {
			measure(b, len(es), func() {
				p := newProjection()
				p.BeginReplay(nil)
				for _, e := range es {
					_ = p.Apply(e)
				}
				_ = p.EndReplay(nil)
			})
			b.ReportMetric(float64(len(es)), "events/log")
		})
	}
}

var errPositional = errors.New("line does not have the writer's layout")

// parsePositional parses every line of a log the way a fast path could:
// CRC first, then fields by position. It returns the number of entries.
func parsePositional(data []byte) (int, error) {
	table := crc32.MakeTable(crc32.Castagnoli)
	const crcSuffix = len(`,"crc":"`) + 8 + len(`"}`)
	n := 0
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			return n, errPositional
		}
		line := data[:i]
		data = data[i+1:]
		if len(line) < crcSuffix+8 {
			return n, errPositional
		}
		body := line[:len(line)-crcSuffix]
		want, err := strconv.ParseUint(string(line[len(line)-10:len(line)-2]), 16, 32)
		if err != nil || crc32.Checksum(body, table) != uint32(want) {
			return n, errPositional
		}
		if !utf8.Valid(line) {
			return n, errPositional
		}
		rest, ok := bytes.CutPrefix(body, []byte(`{"seq":`))
		if !ok {
			return n, errPositional
		}
		k := bytes.IndexByte(rest, ',')
		seq, err := strconv.ParseUint(string(rest[:k]), 10, 64)
		if err != nil {
			return n, errPositional
		}
		rest, ok = bytes.CutPrefix(rest[k:], []byte(`,"ts":"`))
		if !ok {
			return n, errPositional
		}
		k = bytes.IndexByte(rest, '"')
		ts, err := time.Parse(time.RFC3339Nano, string(rest[:k]))
		if err != nil {
			return n, errPositional
		}
		rest, ok = bytes.CutPrefix(rest[k:], []byte(`","event":"`))
		if !ok {
			return n, errPositional
		}
		k = bytes.IndexByte(rest, '"')
		event := string(rest[:k])
		raw, ok := bytes.CutPrefix(rest[k:], []byte(`","data":`))
		if !ok || bytes.IndexByte([]byte(event), '\\') >= 0 {
			return n, errPositional
		}
		e := eventlog.Entry{Seq: seq, TS: ts, Event: event, Data: json.RawMessage(raw)}
		_ = e
		n++
	}
	return n, nil
}
