package config

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// liveness bounds how long a test waits for a callback that must come; it
// guards against a hung test and is not a speed assertion.
const liveness = 30 * time.Second

type watchRun struct {
	t       *testing.T
	path    string
	changes chan Config
	errs    chan error
	done    chan error
	cancel  context.CancelFunc
}

func startWatch(t *testing.T) *watchRun {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	w := &watchRun{
		t:       t,
		path:    filepath.Join(dir, "config.json"),
		changes: make(chan Config, 100),
		errs:    make(chan error, 100),
		done:    make(chan error, 1),
		cancel:  cancel,
	}
	go func() {
		w.done <- WatchWith(ctx, w.path, WatchOptions{
			Logger:   hclog.NewNullLogger(),
			Debounce: 5 * time.Millisecond,
			OnChange: func(c Config) { w.changes <- c },
			OnError:  func(err error) { w.errs <- err },
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-w.done; err != nil {
			t.Errorf("Watch returned %v after cancel, want nil", err)
		}
	})
	return w
}

// nextChange waits for the next OnChange call.
func (w *watchRun) nextChange() Config {
	w.t.Helper()
	select {
	case c := <-w.changes:
		return c
	case err := <-w.done:
		w.t.Fatalf("Watch ended early: %v", err)
	case <-time.After(liveness):
		w.t.Fatal("no OnChange call")
	}
	return Config{}
}

// nextError waits for the next OnError call.
func (w *watchRun) nextError() error {
	w.t.Helper()
	select {
	case err := <-w.errs:
		return err
	case err := <-w.done:
		w.t.Fatalf("Watch ended early: %v", err)
	case <-time.After(liveness):
		w.t.Fatal("no OnError call")
	}
	return nil
}

func (w *watchRun) write(content string) {
	w.t.Helper()
	if err := os.WriteFile(w.path, []byte(content), 0o600); err != nil {
		w.t.Fatal(err)
	}
}

func (w *watchRun) replace(content string) {
	w.t.Helper()
	tmp := w.path + ".tmp-edit"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		w.t.Fatal(err)
	}
	if err := os.Rename(tmp, w.path); err != nil {
		w.t.Fatal(err)
	}
}

func mustParse(t *testing.T, s string) Config {
	t.Helper()
	c, err := Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestWatchInitialThenValidWrite(t *testing.T) {
	w := startWatch(t)
	if got := w.nextChange(); !reflect.DeepEqual(got, Default()) {
		t.Fatalf("initial config without a file = %+v, want defaults", got)
	}
	w.write(`{"max_retries": 7, "pools": {"default": 9}}`)
	want := mustParse(t, `{"max_retries": 7, "pools": {"default": 9}}`)
	if got := w.nextChange(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after write: %+v, want %+v", got, want)
	}
}

func TestWatchInvalidKeepsPrevious(t *testing.T) {
	w := startWatch(t)
	w.nextChange() // initial defaults
	w.write(`{"max_retries": 2}`)
	if got := w.nextChange(); got.MaxRetries != 2 {
		t.Fatalf("valid write: %+v", got)
	}

	w.write(`{"max_retries": -5}`)
	err := w.nextError()
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("OnError got %v, want ErrInvalid", err)
	}
	if len(w.changes) != 0 {
		t.Fatalf("OnChange called for an invalid file: %+v", <-w.changes)
	}

	// The next valid config is the next OnChange: nothing was applied for
	// the invalid file in between.
	w.write(`{"max_retries": 4}`)
	if got := w.nextChange(); got.MaxRetries != 4 {
		t.Fatalf("after invalid then valid: %+v, want max_retries 4", got)
	}
}

func TestWatchInvalidAtStart(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.json")
	if err := os.WriteFile(path, []byte(`{"pols": {}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- WatchWith(ctx, path, WatchOptions{
			OnChange: func(c Config) { t.Errorf("OnChange %+v for an invalid file", c) },
			OnError:  func(err error) { errs <- err },
		})
	}()
	select {
	case err := <-errs:
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("got %v", err)
		}
	case <-time.After(liveness):
		t.Fatal("no OnError for an invalid file at start")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Watch returned %v", err)
	}
}

func TestWatchAtomicReplaceByRename(t *testing.T) {
	w := startWatch(t)
	w.nextChange()
	w.replace(`{"turn_timeout_s": 42}`)
	if got := w.nextChange(); got.TurnTimeout != 42*time.Second {
		t.Fatalf("after rename: %+v", got)
	}
	w.replace(`{"turn_timeout_s": 43}`)
	if got := w.nextChange(); got.TurnTimeout != 43*time.Second {
		t.Fatalf("after second rename: %+v", got)
	}
}

func TestWatchRemovalRestoresDefaults(t *testing.T) {
	w := startWatch(t)
	w.nextChange()
	w.write(`{"max_retries": 1}`)
	if got := w.nextChange(); got.MaxRetries != 1 {
		t.Fatalf("%+v", got)
	}
	if err := os.Remove(w.path); err != nil {
		t.Fatal(err)
	}
	if got := w.nextChange(); !reflect.DeepEqual(got, Default()) {
		t.Fatalf("after removal: %+v, want defaults", got)
	}
}

func TestWatchIgnoresOtherFiles(t *testing.T) {
	w := startWatch(t)
	w.nextChange()
	other := filepath.Join(filepath.Dir(w.path), "other.json")
	if err := os.WriteFile(other, []byte(`{"max_retries": -1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// The marker write comes after the unrelated one; if the unrelated file
	// had been loaded, an OnError would be queued before this OnChange.
	w.write(`{"max_retries": 6}`)
	if got := w.nextChange(); got.MaxRetries != 6 {
		t.Fatalf("%+v", got)
	}
	if len(w.errs) != 0 {
		t.Fatalf("an unrelated file caused an error: %v", <-w.errs)
	}
}

func TestWatchMissingDirectory(t *testing.T) {
	err := WatchWith(context.Background(), filepath.Join(t.TempDir(), "nope", "config.json"), WatchOptions{})
	if err == nil {
		t.Fatal("Watch on a missing directory succeeded")
	}
}
