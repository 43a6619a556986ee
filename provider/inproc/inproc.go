package inproc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/provider"
)

var (
	// ErrUnknownModel is wrapped (inside a permanent provider error) by Send
	// when no Program is registered for the session's model.
	ErrUnknownModel = errors.New("no program registered for this model")
	// ErrStopped is returned by Send on a session after Stop.
	ErrStopped = errors.New("inproc session is stopped")
	// ErrTurnOver is returned by Turn.Call when the turn's Send has already
	// returned (the program outlived a cancelled turn).
	ErrTurnOver = errors.New("turn is over")
)

// Options configures a Provider.
type Options struct {
	// NativeResume makes Restore with a nil blob bring back a session from
	// its handle alone, as long as this Provider has seen the handle.
	NativeResume bool
	// Logger receives debug logs; nil means no logging.
	Logger hclog.Logger
}

// Provider is the in-process provider. It is safe for concurrent use.
type Provider struct {
	name string
	opts Options
	log  hclog.Logger

	mu       sync.Mutex
	programs map[string]Program
	calls    map[string]int
	sends    int
	// native holds, per handle this Provider created or restored, the
	// history it last recorded (the "provider side" state of a native
	// resume).
	native map[string][]provider.Turn
}

var _ provider.Provider = (*Provider)(nil)

// New returns a Provider reporting name from Name, with the built-in "echo"
// program registered.
func New(name string, opts Options) *Provider {
	log := opts.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	p := &Provider{
		name:     name,
		opts:     opts,
		log:      log.Named("inproc"),
		programs: make(map[string]Program),
		calls:    make(map[string]int),
		native:   make(map[string][]provider.Turn),
	}
	p.programs["echo"] = Echo
	return p
}

// Register sets the program run for sessions whose model is model,
// replacing any earlier registration. A nil prog removes the model.
func (p *Provider) Register(model string, prog Program) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if prog == nil {
		delete(p.programs, model)
		return
	}
	p.programs[model] = prog
}

// Models returns the registered model names, sorted.
func (p *Provider) Models() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.modelsLocked()
}

func (p *Provider) modelsLocked() []string {
	names := make([]string, 0, len(p.programs))
	for m := range p.programs {
		names = append(names, m)
	}
	sort.Strings(names)
	return names
}

// CheckModel implements provider.ModelChecker: the model must have a
// registered program.
func (p *Provider) CheckModel(model string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.programs[model]; !ok {
		return fmt.Errorf("inproc provider %q: model %q (%w); registered models: %s",
			p.name, model, ErrUnknownModel, strings.Join(p.modelsLocked(), ", "))
	}
	return nil
}

// Calls returns how many times Send was called on sessions with this model
// (including calls that failed).
func (p *Provider) Calls(model string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[model]
}

// Sends returns the total number of Send calls on this Provider's sessions.
func (p *Provider) Sends() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sends
}

// Name implements provider.Provider.
func (p *Provider) Name() string { return p.name }

// Capabilities implements provider.Provider: NativeResume as configured, no
// structured history, the history given back with the blob on Restore.
func (p *Provider) Capabilities() provider.Capabilities {
	return provider.Capabilities{NativeResume: p.opts.NativeResume, StructuredHistory: false, HistoryOnRestore: true}
}

// Create implements provider.Provider. It never fails for an unknown model:
// that is reported by Send, as a failed turn.
func (p *Provider) Create(ctx context.Context, spec provider.Spec) (provider.Session, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("inproc create: %w", err)
	}
	handle, err := newHandle()
	if err != nil {
		return nil, err
	}
	p.log.Debug("session created", "agent_id", spec.AgentID, "model", spec.Model, "handle", handle)
	return p.newSession(spec, handle, nil), nil
}

// blob is the Suspend format: the handle and the number of turns. Blobs
// written before the history moved out of them also carry it ("history"),
// and Restore still reads those.
type blob struct {
	Handle  string          `json:"handle"`
	Turns   int             `json:"turns"`
	History []provider.Turn `json:"history,omitempty"`
}

// Restore implements provider.Provider; see the package documentation.
func (p *Provider) Restore(ctx context.Context, spec provider.Spec, data []byte, handle string) (provider.Session, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("inproc restore: %w", err)
	}
	if len(data) > 0 {
		var b blob
		if err := json.Unmarshal(data, &b); err != nil {
			return nil, fmt.Errorf("inproc restore: malformed suspend blob (%v): %w", err, provider.ErrCannotRestore)
		}
		if b.Handle == "" {
			b.Handle = handle
		}
		if b.Handle == "" {
			return nil, fmt.Errorf("inproc restore: suspend blob has no handle: %w", provider.ErrCannotRestore)
		}
		hist := b.History
		if hist == nil {
			hist = spec.History
		}
		p.log.Debug("session restored from blob", "agent_id", spec.AgentID, "handle", b.Handle, "history_turns", len(hist))
		return p.newSession(spec, b.Handle, hist), nil
	}
	if !p.opts.NativeResume {
		return nil, fmt.Errorf("inproc restore: provider %q has no native resume and no suspend blob was given: %w", p.name, provider.ErrCannotRestore)
	}
	p.mu.Lock()
	hist, ok := p.native[handle]
	p.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("inproc restore: handle %q is unknown to this provider instance: %w", handle, provider.ErrCannotRestore)
	}
	p.log.Debug("session resumed natively", "agent_id", spec.AgentID, "handle", handle, "history_turns", len(hist))
	return p.newSession(spec, handle, hist), nil
}

func (p *Provider) newSession(spec provider.Spec, handle string, hist []provider.Turn) *session {
	hist = slices.Clone(hist)
	if p.opts.NativeResume {
		// Only a provider with native resume keeps a copy on its side.
		p.mu.Lock()
		p.native[handle] = slices.Clone(hist)
		p.mu.Unlock()
	}
	return &session{p: p, spec: spec, handle: handle, history: hist}
}

// program looks up the program for model and counts the call.
func (p *Provider) program(model string) (Program, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sends++
	p.calls[model]++
	prog, ok := p.programs[model]
	if !ok {
		return nil, fmt.Errorf("inproc provider %q: model %q (%w); registered models: %s",
			p.name, model, ErrUnknownModel, strings.Join(p.modelsLocked(), ", "))
	}
	return prog, nil
}

func (p *Provider) recordNative(handle string, hist []provider.Turn) {
	if !p.opts.NativeResume {
		return
	}
	p.mu.Lock()
	p.native[handle] = hist
	p.mu.Unlock()
}

func newHandle() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("inproc: generating a session handle: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}
