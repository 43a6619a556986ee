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

// Watch watches the config file at path and reports every change; see
// WatchWith. logger, onChange and onError may be nil.
func Watch(ctx context.Context, path string, logger hclog.Logger, onChange func(Config), onError func(error)) error {
	return WatchWith(ctx, path, WatchOptions{Logger: logger, OnChange: onChange, OnError: onError})
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
	log := opts.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	if opts.FS == nil {
		opts.FS = faultfs.OS{}
	}
	if opts.Debounce <= 0 {
		opts.Debounce = DefaultDebounce
	}
	onChange := opts.OnChange
	if onChange == nil {
		onChange = func(Config) {}
	}
	onError := opts.OnError
	if onError == nil {
		onError = func(error) {}
	}

	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("watch config %s: %w", path, err)
	}
	dir, base := filepath.Dir(abs), filepath.Base(abs)
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch config %s: starting the file watcher: %w", path, err)
	}
	defer w.Close()
	if err := w.Add(dir); err != nil {
		return fmt.Errorf("watch config %s: watching directory %s (does it exist?): %w", path, dir, err)
	}

	var last *Config
	reload := func() {
		data, err := readLimited(opts.FS, abs)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if opts.OnValid != nil {
				opts.OnValid()
			}
			apply(&last, Default(), log, abs, onChange)
			return
		case err != nil:
			err = fmt.Errorf("config %s: %w; keeping the previous config", path, err)
		case isBlank(data):
			log.Debug("config file is empty, waiting for it to be written", "path", abs)
			return
		default:
			var cfg Config
			if cfg, err = Parse(data); err == nil {
				if opts.OnValid != nil {
					opts.OnValid()
				}
				apply(&last, cfg, log, abs, onChange)
				return
			}
			err = fmt.Errorf("config %s: %w; keeping the previous config", path, err)
		}
		log.Warn("config not applied", "path", abs, "error", err)
		onError(err)
	}
	reload()

	timer := time.NewTimer(opts.Debounce)
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
			if filepath.Base(ev.Name) != base || filepath.Dir(ev.Name) != dir {
				if ev.Name == dir && ev.Has(fsnotify.Remove|fsnotify.Rename) {
					log.Warn("config directory removed; no longer watching", "dir", dir)
				}
				continue
			}
			if ev.Has(fsnotify.Create | fsnotify.Write | fsnotify.Rename | fsnotify.Remove) {
				timer.Reset(opts.Debounce)
			}
		case err, ok := <-w.Errors:
			if !ok {
				return nil
			}
			err = fmt.Errorf("config watcher for %s: %w", path, err)
			log.Warn("config watcher error", "error", err)
			onError(err)
		case <-timer.C:
			reload()
		}
	}
}

func apply(last **Config, cfg Config, log hclog.Logger, path string, onChange func(Config)) {
	if *last != nil && reflect.DeepEqual(**last, cfg) {
		return
	}
	*last = &cfg
	log.Info("config applied", "path", path, "pools", fmt.Sprint(cfg.Pools), "max_retries", cfg.MaxRetries,
		"retry_base_delay", cfg.RetryBaseDelay.String(), "turn_timeout", cfg.TurnTimeout.String())
	onChange(cfg)
}
