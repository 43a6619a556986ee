package daemon

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/bus"
	"github.com/warren-dev/warren/config"
	"github.com/warren-dev/warren/engine"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/homedir"
	"github.com/warren-dev/warren/notify"
	"github.com/warren-dev/warren/protocol"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/server"
)

// Notifications (SPEC 14, package notify): the sinks of config.json's
// "notify" as the daemon started, fed by the Core's logs. A change of the
// sinks takes a restart (the notifier's record names its sinks).

// notifySource is the Core as the notifier reads it.
type notifySource struct{ c *engine.Core }

func (s notifySource) Path(id string) string                 { return s.c.Path(id) }
func (s notifySource) IsRoot(id string) bool                 { return s.c.IsRoot(id) }
func (s notifySource) Logs() []string                        { return append(s.c.Walk(), "USER") }
func (s notifySource) Subscribe() (<-chan bus.Event, func()) { return s.c.SubscribeEvents("", false) }
func (s notifySource) Read(ctx context.Context, log string, from uint64, fn func(eventlog.Entry) error) error {
	return s.c.ReadEntries(ctx, log, from, fn)
}

// newNotifier makes the notifier of cfg's sinks (nil: none).
func newNotifier(fsys faultfs.FS, home string, cfg config.Config, core *engine.Core, logger hclog.Logger) *notify.Notifier {
	if len(cfg.Notify) == 0 {
		return nil
	}
	homeArg := ""
	def := os.Getenv("WARREN_HOME")
	if def == "" {
		if uh, err := os.UserHomeDir(); err == nil {
			def = filepath.Join(uh, ".warren")
		}
	}
	if !homedir.Same(def, home) {
		homeArg = notify.HomeArg(home)
	}
	return notify.New(notify.Options{Sinks: notify.NewSinks(cfg.Notify, os.Getenv, provider.ProcessEnv(os.Environ(), nil)),
		FS: fsys, Home: home, Source: notifySource{core}, Logger: logger.Named("notify"), HomeArg: homeArg})
}

// notifyTest is notify.test: a sample notification to every sink.
func (h *handler) notifyTest(ctx context.Context, _ protocol.Params, _ server.Stream) (any, error) {
	if h.notifier == nil {
		return nil, protocol.Errorf(protocol.CodeInvalid, `no notification sinks: add "notify" to config.json (for example [{"type": "command", "argv": ["notify-send", "warren"]}]) and restart the daemon`)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var sinks []any
	for name, err := range h.notifier.Test(ctx) {
		m := map[string]any{"name": name, "ok": err == nil}
		if err != nil {
			m["error"] = err.Error()
		}
		sinks = append(sinks, m)
	}
	return map[string]any{"sinks": sinks}, nil
}

// notifyLog is notify.log: the last lines of notify.jsonl (limit, default
// 100).
func (h *handler) notifyLog(_ context.Context, p protocol.Params, _ server.Stream) (any, error) {
	limit, err := p.OptInt("limit", 100)
	if err != nil {
		return nil, err
	}
	if limit < 1 || limit > 10000 {
		return nil, protocol.Errorf(protocol.CodeInvalid, "param limit: must be 1 to 10000, got %d", limit)
	}
	lines, err := notify.Log(faultfs.OS{}, filepath.Join(h.home, "notify.jsonl"), limit)
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInternal, "reading notify.jsonl: %v", err)
	}
	out := make([]any, 0, len(lines))
	for _, l := range lines {
		out = append(out, string(l))
	}
	return map[string]any{"lines": out}, nil
}

// notifyStatus is daemon.status's "notify".
func notifyStatus(s notify.Stats) map[string]any {
	sinks := make([]any, 0, len(s.Sinks))
	for _, k := range s.Sinks {
		m := map[string]any{"name": k.Name, "queued": k.Queued, "dropped": k.Dropped}
		if k.LastError != "" {
			m["last_error"] = k.LastError
		}
		sinks = append(sinks, m)
	}
	return map[string]any{"sinks": sinks, "delivered": s.Delivered, "pending": s.Pending}
}
