package jetstream

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/store"
	"github.com/warren-dev/warren/store/jetstream/natsembed"
	"github.com/warren-dev/warren/store/local"
	"github.com/warren-dev/warren/store/storetest"
)

// BenchmarkAppend compares appends/s of the stores on this machine, one
// log with one writer and 16 logs with one writer each, all durable
// (fsync / SyncAlways):
//
//	go test ./store/jetstream -run '^$' -bench Append -benchtime 2000x -count 3
//
// Records are about 200 bytes, as in the study's spike.
func BenchmarkAppend(b *testing.B) {
	for _, writers := range []int{1, 16} {
		b.Run("local/writers="+itoa(writers), func(b *testing.B) {
			s := local.New(local.Options{FS: faultfs.OS{}, Home: b.TempDir()})
			benchStore(b, s, writers)
		})
		b.Run("jetstream-R1/writers="+itoa(writers), func(b *testing.B) {
			srv := embed(b, natsembed.Options{Name: "n1"})
			nc, err := nats.Connect("", nats.InProcessServer(srv))
			if err != nil {
				b.Fatal(err)
			}
			defer nc.Close()
			benchStore(b, newStore(b, nc, "bench", srv), writers)
		})
		b.Run("jetstream-R3/writers="+itoa(writers), func(b *testing.B) {
			srvs, urls := startCluster(b)
			benchStore(b, clusterStore(b, urls, srvs, time.Minute), writers)
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func benchStore(b *testing.B, s store.Store, writers int) {
	ctx := context.Background()
	logs := make([]store.Log, writers)
	for i := range logs {
		id := storetest.NewID(b)
		l, err := s.Own(ctx, id)
		if err != nil {
			b.Fatal(err)
		}
		defer l.Release(ctx)
		lg, err := s.OpenLog(ctx, id, store.LogOptions{Lease: l})
		if err != nil {
			b.Fatal(err)
		}
		defer lg.Close()
		logs[i] = lg
	}
	data := map[string]string{}
	data["text"] = "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"
	b.ResetTimer()
	var wg sync.WaitGroup
	per := b.N / writers
	if per == 0 {
		per = 1
	}
	start := time.Now()
	for _, lg := range logs {
		wg.Add(1)
		go func(lg store.Log) {
			defer wg.Done()
			for i := 0; i < per; i++ {
				if _, err := lg.Append("bench.event", data); err != nil {
					b.Error(err)
					return
				}
			}
		}(lg)
	}
	wg.Wait()
	b.ReportMetric(float64(per*writers)/time.Since(start).Seconds(), "appends/s")
}
