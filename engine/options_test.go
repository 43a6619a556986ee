package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/warren-dev/warren/config"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/store"
	"github.com/warren-dev/warren/store/local"
)

// withDefaults gives a test's CoreOptions, for what it leaves zero, the
// values the daemon passes (config.Default, config/engine.go, the
// binary's default provider): the values NewCore filled in before the
// engine had no defaults of its own, so each test keeps its meaning.
func withDefaults(o CoreOptions) CoreOptions {
	if o.Config.Pools == nil {
		o.Config = config.Default()
		o.Config.Resume = config.ResumeManual // as the harness: the policy's tests set auto
	}
	if o.DefaultProvider == "" {
		o.DefaultProvider = "inproc"
	}
	if o.CheckpointEvery == 0 {
		o.CheckpointEvery = config.DefaultCheckpointEvery
	}
	if o.SessionSaveDelay == 0 {
		o.SessionSaveDelay = config.DefaultSessionSaveDelay
	}
	if o.MaxOpenLogs == 0 {
		o.MaxOpenLogs = config.DefaultMaxOpenLogs
	}
	if o.TakeoverEvery == 0 {
		o.TakeoverEvery = config.DefaultTakeoverEvery
	}
	return o
}

// TestNewCoreRefusesMissingSettings: the engine has no policy defaults, so
// a required setting left zero is refused with what to pass.
func TestNewCoreRefusesMissingSettings(t *testing.T) {
	good := func() CoreOptions { return withDefaults(CoreOptions{FS: faultfs.NewMem(), Home: "/home"}) }
	for _, tc := range []struct {
		name string
		edit func(o *CoreOptions)
		want string
	}{
		{"no config", func(o *CoreOptions) { o.Config = config.Config{} }, "CoreOptions.Config is required"},
		{"no open-logs cap", func(o *CoreOptions) { o.MaxOpenLogs = 0 }, "config.DefaultMaxOpenLogs"},
		{"no takeover interval on a cluster store", func(o *CoreOptions) {
			// Any store but store/local is a cluster's.
			o.Store = struct{ store.Store }{local.New(local.Options{FS: o.FS, Home: o.Home})}
			o.TakeoverEvery = 0
		}, "config.DefaultTakeoverEvery"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := good()
			tc.edit(&o)
			c, err := NewCore(context.Background(), o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewCore = %v, %v; want an error naming %q", c, err, tc.want)
			}
		})
	}
	if _, err := NewCore(context.Background(), good()); err != nil {
		t.Fatalf("NewCore with the daemon's settings: %v", err)
	}
}
