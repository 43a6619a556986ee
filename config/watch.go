package config

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"reflect"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/faultfs"
)

// DefaultDebounce is how long the watcher waits after the last change to
// the file before reloading it.
const DefaultDebounce = 100 * time.Millisecond

// WatchOptions configures WatchWith.
type WatchOptions struct {
	// Logger receives reload and error reports (default: a null logger).
	Logger hclog.Logger
	// FS reads the file (default faultfs.OS{}). Change notifications always
	// come from the real filesystem.
	FS faultfs.FS
	// Debounce is the quiet period before a reload (default DefaultDebounce).
	Debounce time.Duration
	// OnChange receives each new valid config.
	OnChange func(Config)
	// OnError receives each failure: an invalid file (the previous config
	// stays in force) or a watcher error.
	OnError func(error)
	// OnValid, when set, is called on every load that found a valid file
	// (or none), changed or not, before OnChange: a caller that reported
	// an invalid file learns it is fixed even when it is back to the
	// config in force.
	OnValid func()
}

// WatchWith watches the config file at path until ctx is cancelled, then
// returns nil. It returns an error at once if the watch cannot be set up
// (for example the file's directory does not exist).
//
// It watches the parent directory, so that an editor or a tool replacing the
// file by rename is seen. Once the watch is in place it loads the file and
// reports the result (OnChange with the config, or OnError), so the caller
// knows from the first callback that later changes will be seen. After that,
// each create, write, rename or remove of the file starts a quiet period of
// opts.Debounce; then the file is loaded again. A valid config that differs
// from the last one reported is passed to OnChange; a removed file means the
// defaults. An invalid file is reported to OnError and the logger, and the
// previous config stays in force. An empty file is taken as a write in
// progress and ignored until the next change. Callbacks run one at a time,
// on the watching goroutine.
func WatchWith(ctx context.Context, path string, opts WatchOptions) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("watch config %s: %w", path, err)
	}
	cw := &configWatch{opts: opts.withDefaults(), path: path, abs: abs, dir: filepath.Dir(abs), base: filepath.Base(abs)}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch config %s: starting the file watcher: %w", path, err)
	}
	defer w.Close()
	if err := w.Add(cw.dir); err != nil {
		return fmt.Errorf("watch config %s: watching directory %s (does it exist?): %w", path, cw.dir, err)
	}
	cw.reload()
	return cw.loop(ctx, w)
}

// withDefaults fills in the defaults of the unset options.
func (opts WatchOptions) withDefaults() WatchOptions {
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.FS == nil {
		opts.FS = faultfs.OS{}
	}
	if opts.Debounce <= 0 {
		opts.Debounce = DefaultDebounce
	}
	if opts.OnChange == nil {
		opts.OnChange = func(Config) {}
	}
	if opts.OnError == nil {
		opts.OnError = func(error) {}
	}
	return opts
}

// configWatch is the state of one WatchWith: the file and the last config
// reported. Its methods run on the watching goroutine only.
type configWatch struct {
	opts      WatchOptions // with defaults
	path      string       // as given, for error texts
	abs       string
	dir, base string
	last      *Config
}

// loop debounces the file's events into reloads until ctx is done or the
// watcher closes.
func (cw *configWatch) loop(ctx context.Context, w *fsnotify.Watcher) error {
	timer := time.NewTimer(cw.opts.Debounce)
	if !timer.Stop() {
		<-timer.C
	}
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return nil
			}
			if cw.concerns(ev) {
				timer.Reset(cw.opts.Debounce)
			}
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			err = fmt.Errorf("config watcher for %s: %w", cw.path, err)
			cw.opts.Logger.Warn("config watcher error", "error", err)
			cw.opts.OnError(err)
		case <-timer.C:
			cw.reload()
		}
	}
}

// concerns reports whether ev changes the config file (and so starts a
// quiet period); it logs the removal of the watched directory.
func (cw *configWatch) concerns(ev fsnotify.Event) bool {
	if filepath.Base(ev.Name) != cw.base || filepath.Dir(ev.Name) != cw.dir {
		if ev.Name == cw.dir && ev.Has(fsnotify.Remove|fsnotify.Rename) {
			cw.opts.Logger.Warn("config directory removed; no longer watching", "dir", cw.dir)
		}
		return false
	}
	return ev.Has(fsnotify.Create | fsnotify.Write | fsnotify.Rename | fsnotify.Remove)
}

// reload loads the file and reports the result: a valid config (or the
// defaults for a missing file) to OnValid and, when it differs from the
// last, OnChange; an error to the logger and OnError. An empty file is
// ignored.
func (cw *configWatch) reload() {
	data, err := readLimited(cw.opts.FS, cw.abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		cw.valid(Default())
		return
	case err != nil:
		err = fmt.Errorf("config %s: %w; keeping the previous config", cw.path, err)
	case isBlank(data):
		cw.opts.Logger.Debug("config file is empty, waiting for it to be written", "path", cw.abs)
		return
	default:
		var cfg Config
		if cfg, err = Parse(data); err == nil {
			cw.valid(cfg)
			return
		}
		err = fmt.Errorf("config %s: %w; keeping the previous config", cw.path, err)
	}
	cw.opts.Logger.Warn("config not applied", "path", cw.abs, "error", err)
	cw.opts.OnError(err)
}

// valid reports a valid config: OnValid, then OnChange if it differs from
// the last one reported.
func (cw *configWatch) valid(cfg Config) {
	if cw.opts.OnValid != nil {
		cw.opts.OnValid()
	}
	if cw.last != nil && reflect.DeepEqual(*cw.last, cfg) {
		return
	}
	cw.last = &cfg
	cw.opts.Logger.Info("config applied", "path", cw.abs, "pools", fmt.Sprint(cfg.Pools), "max_retries", cfg.MaxRetries,
		"retry_base_delay", cfg.RetryBaseDelay.String(), "turn_timeout", cfg.TurnTimeout.String())
	cw.opts.OnChange(cfg)
}
