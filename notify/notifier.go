package notify

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/bus"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
)

// Source is what the notifier reads: the daemon's logs and their live
// stream (the engine's Core).
type Source interface {
	Names
	// Subscribe streams every logged entry of every log; the channel is
	// closed when the subscriber falls behind or the daemon stops.
	Subscribe() (<-chan bus.Event, func())
	// Logs lists the logs that can notify: every agent's and "USER".
	Logs() []string
	// Read calls fn for each entry of log from fromSeq on.
	Read(ctx context.Context, log string, fromSeq uint64, fn func(eventlog.Entry) error) error
}

// Options configure a Notifier.
type Options struct {
	Sinks  []Sink
	FS     faultfs.FS
	Home   string // notify.jsonl is here
	Source Source
	Logger hclog.Logger
	// HomeArg ends the commands a notification carries: "", or
	// HomeArg(home) for a home that is not the default.
	HomeArg string
	// MarkEvery is how often the mark is written when it moved (default
	// 1 s); QueueLen bounds each sink's queue (default 1,024).
	MarkEvery time.Duration
	QueueLen  int
	// Following, if set, is called each time the notifier has read the
	// logs and follows the live stream (tests wait on it).
	Following func()
}

// Notifier delivers the notifications of the logs to the sinks (doc.go).
type Notifier struct {
	opts    Options
	rec     record
	workers []*worker

	mu   sync.Mutex
	st   state
	high map[string]uint64         // the highest seq observed of each log
	owed map[string]map[uint64]int // log -> seq -> sinks that have not acknowledged it (made this run)
	last map[string]string         // sink -> its last error, for Stats

	delivered atomic.Int64
}

type worker struct {
	sink     Sink
	q        chan Notification
	dropped  atomic.Int64
	reported int64
}

// New makes a notifier; Run starts it.
func New(o Options) *Notifier {
	if o.MarkEvery <= 0 {
		o.MarkEvery = time.Second
	}
	if o.QueueLen <= 0 {
		o.QueueLen = 1024
	}
	n := &Notifier{opts: o, rec: record{fsys: o.FS, path: filepath.Join(o.Home, "notify.jsonl")},
		high: map[string]uint64{}, owed: map[string]map[uint64]int{}, last: map[string]string{}}
	for _, s := range o.Sinks {
		n.workers = append(n.workers, &worker{sink: s, q: make(chan Notification, o.QueueLen)})
	}
	return n
}

// Run delivers until ctx ends: it reads each log from its mark, then
// follows the live stream (reading again from the mark whenever the stream
// was lost).
func (n *Notifier) Run(ctx context.Context) error {
	st, err := n.rec.load()
	if err != nil {
		return fmt.Errorf("reading %s: %w", n.rec.path, err)
	}
	n.st = st
	if st.fresh {
		n.st.since = time.Now().UTC()
		if err := n.rec.append(line{Mark: map[string]uint64{}, Since: n.st.since.Format(time.RFC3339Nano), TS: n.st.since.Format(time.RFC3339Nano)}); err != nil {
			return fmt.Errorf("writing %s: %w", n.rec.path, err)
		}
	}
	defer n.rec.close()
	defer n.writeMark() // after the workers: what they acknowledged counts
	var wg sync.WaitGroup
	for _, w := range n.workers {
		wg.Add(1)
		go func() { defer wg.Done(); n.deliver(ctx, w) }()
	}
	wg.Add(1)
	go func() { defer wg.Done(); n.marker(ctx) }()
	defer wg.Wait()
	for ctx.Err() == nil {
		ch, cancel := n.opts.Source.Subscribe()
		n.scan(ctx)
		if n.opts.Following != nil {
			n.opts.Following()
		}
		n.follow(ctx, ch)
		cancel()
		select {
		case <-ctx.Done():
		case <-time.After(time.Second): // the stream was lost: read the logs again
		}
	}
	return nil
}

// scan reads every log from its mark on.
func (n *Notifier) scan(ctx context.Context) {
	for _, log := range n.opts.Source.Logs() {
		n.mu.Lock()
		from := n.st.mark[log] + 1
		n.mu.Unlock()
		err := n.opts.Source.Read(ctx, log, from, func(e eventlog.Entry) error {
			n.observe(log, e)
			return ctx.Err()
		})
		if err != nil && ctx.Err() == nil {
			n.opts.Logger.Warn("notifications: reading a log", "log", log, "err", err)
		}
	}
}

// follow takes the live stream until it ends.
func (n *Notifier) follow(ctx context.Context, ch <-chan bus.Event) {
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return
			}
			if ev.Entry.Seq > 0 {
				n.observe(ev.AgentID, ev.Entry)
			}
		case <-ctx.Done():
			return
		}
	}
}

// observe takes one entry of a log: a notification is queued for every
// sink that has not acknowledged it.
func (n *Notifier) observe(log string, e eventlog.Entry) {
	n.mu.Lock()
	if e.Seq > n.high[log] {
		n.high[log] = e.Seq
	}
	nt, ok := classify(log, e, n.opts.Source, n.opts.HomeArg)
	_, owing := n.owed[log][e.Seq]
	if !ok || owing || e.TS.Before(n.st.since) {
		n.mu.Unlock()
		return
	}
	var to []*worker
	for _, w := range n.workers {
		if !n.st.acks[nt.ID][w.sink.Name()] {
			to = append(to, w)
		}
	}
	if len(to) > 0 {
		if n.owed[log] == nil {
			n.owed[log] = map[uint64]int{}
		}
		n.owed[log][e.Seq] = len(to)
	}
	n.mu.Unlock()
	for _, w := range to {
		select {
		case w.q <- nt:
		default:
			w.dropped.Add(1) // still owed: the mark stays before it, so the next start delivers it
		}
	}
}

// deliver is one sink's worker.
func (n *Notifier) deliver(ctx context.Context, w *worker) {
	for {
		select {
		case nt := <-w.q:
			if !n.send(ctx, w.sink, nt) {
				return
			}
			n.acked(w.sink.Name(), nt)
			if d := w.dropped.Load(); d > w.reported && len(w.q) == 0 {
				w.reported = d
				drop := Notification{ID: fmt.Sprintf("dropped:%s:%d", w.sink.Name(), d), Kind: KindDropped,
					TS:   time.Now().UTC().Format("2006-01-02T15:04:05.000Z"),
					Text: fmt.Sprintf("%d notifications were dropped because this sink fell behind; they are delivered again at the next start", d)}
				n.send(ctx, w.sink, drop)
			}
		case <-ctx.Done():
			return
		}
	}
}

// send delivers nt to sink, retrying with backoff until it is taken;
// false when ctx ended first.
func (n *Notifier) send(ctx context.Context, sink Sink, nt Notification) bool {
	delay := time.Second
	for {
		err := sink.Send(ctx, nt)
		n.mu.Lock()
		if err != nil {
			n.last[sink.Name()] = err.Error()
		} else {
			delete(n.last, sink.Name())
		}
		n.mu.Unlock()
		if err == nil {
			return true
		}
		n.opts.Logger.Warn("a notification sink failed; retrying", "sink", sink.Name(), "id", nt.ID, "in", delay, "err", err)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(delay):
		}
		delay = min(delay*2, 5*time.Minute)
	}
}

// acked records that sink took nt.
func (n *Notifier) acked(sink string, nt Notification) {
	n.delivered.Add(1)
	log, seq, ok := splitID(nt.ID)
	if !ok || nt.Kind == KindTest || nt.Kind == KindDropped {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.rec.append(line{Ack: nt.ID, Sink: sink, TS: time.Now().UTC().Format(time.RFC3339Nano)}); err != nil {
		n.opts.Logger.Warn("notifications: recording a delivery (it may be delivered again after a restart)", "err", err)
	}
	if n.st.acks[nt.ID] == nil {
		n.st.acks[nt.ID] = map[string]bool{}
	}
	n.st.acks[nt.ID][sink] = true
	if n.owed[log][seq]--; n.owed[log][seq] <= 0 {
		delete(n.owed[log], seq)
	}
}

// marker writes the mark every MarkEvery while it moves (and Run once
// more at its end).
func (n *Notifier) marker(ctx context.Context) {
	t := time.NewTicker(n.opts.MarkEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			n.writeMark()
		case <-ctx.Done():
			return
		}
	}
}

// writeMark records, for each log, the seq up to which every
// notification was acknowledged by every sink.
func (n *Notifier) writeMark() {
	n.mu.Lock()
	defer n.mu.Unlock()
	m := make(map[string]uint64, len(n.st.mark))
	changed := false
	for log, v := range n.st.mark {
		m[log] = v
	}
	for log, h := range n.high {
		for seq := range n.owed[log] {
			h = min(h, seq-1)
		}
		if h > m[log] {
			m[log], changed = h, true
		}
	}
	if !changed {
		return
	}
	now := time.Now().UTC().Format(time.RFC3339Nano)
	l := line{Mark: m, Since: n.st.since.Format(time.RFC3339Nano), TS: now}
	var err error
	if n.rec.lines >= maxLines {
		err = n.rec.rewrite(l, n.st.acks)
	} else {
		err = n.rec.append(l)
	}
	if err != nil {
		n.opts.Logger.Warn("notifications: writing the mark", "err", err)
		return
	}
	n.st.mark = m
	for id := range n.st.acks {
		if !past(id, m) {
			delete(n.st.acks, id)
		}
	}
}

// Stats is what daemon.status shows of the notifier.
type Stats struct {
	Sinks     []SinkStats `json:"sinks"`
	Delivered int64       `json:"delivered"`
	Pending   int         `json:"pending"`
}

// SinkStats is one sink's state.
type SinkStats struct {
	Name      string `json:"name"`
	Queued    int    `json:"queued"`
	Dropped   int64  `json:"dropped"`
	LastError string `json:"last_error,omitempty"`
}

// Stats returns the notifier's counts.
func (n *Notifier) Stats() Stats {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := Stats{Delivered: n.delivered.Load()}
	for _, o := range n.owed {
		for _, k := range o {
			s.Pending += k
		}
	}
	for _, w := range n.workers {
		s.Sinks = append(s.Sinks, SinkStats{Name: w.sink.Name(), Queued: len(w.q), Dropped: w.dropped.Load(),
			LastError: n.last[w.sink.Name()]})
	}
	return s
}

// Test sends a sample notification to every sink, once each, and returns
// each sink's outcome (nil: taken).
func (n *Notifier) Test(ctx context.Context) map[string]error {
	nt := Notification{ID: "test:" + time.Now().UTC().Format("20060102T150405.000"), Kind: KindTest,
		TS: time.Now().UTC().Format("2006-01-02T15:04:05.000Z"), Text: "a test notification from warren",
		Command: "warren waits" + n.opts.HomeArg}
	out := map[string]error{}
	for _, w := range n.workers {
		out[w.sink.Name()] = w.sink.Send(ctx, nt)
	}
	return out
}
