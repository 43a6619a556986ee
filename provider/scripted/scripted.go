package scripted

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/agentproc"
	"github.com/warren-dev/warren/atomicfile"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider"
)

// Defaults applied by New to zero Options fields.
const (
	DefaultPython    = "python3"
	DefaultMaxLine   = 16 << 20
	DefaultStopGrace = 5 * time.Second
	// DefaultNoiseLogged, DefaultMaxNoiseLines and DefaultMaxNoiseBytes
	// bound a program's noise (lines that are not protocol lines) per turn.
	DefaultNoiseLogged   = 5
	DefaultMaxNoiseLines = 1000
	DefaultMaxNoiseBytes = 1 << 20
)

var (
	// ErrNoScript means the session's model (the script path) is empty.
	ErrNoScript = errors.New("scripted provider requires a model: the path of the agent's script")
	// ErrScriptNotFound means the script path does not name a file.
	ErrScriptNotFound = errors.New("scripted agent script not found")
	// ErrNoPython means a ".py" script cannot run: the Python interpreter
	// (Options.Python, default python3) is not on PATH.
	ErrNoPython = errors.New("python3 not found: scripted agents written in Python (.py scripts) need python3 on the daemon's PATH; install python3 or put it on PATH")
	// ErrTurnTimeout is wrapped by the transient error of a turn that ran
	// over Options.TurnTimeout.
	ErrTurnTimeout = errors.New("scripted agent turn timed out")
	// ErrLineTooLong is wrapped by the error of a turn whose program wrote a
	// line longer than Options.MaxLine.
	ErrLineTooLong = errors.New("scripted agent wrote a line longer than the limit")
	// ErrExited is wrapped by the transient error of a turn whose program
	// exited (or closed its stdout) before finishing the turn.
	ErrExited = errors.New("scripted agent exited unexpectedly")
	// ErrStopped is returned by Send on a stopped session.
	ErrStopped = errors.New("scripted session is stopped")
	// ErrNoise is wrapped by the error of a turn whose program wrote more
	// non-protocol lines than Options.MaxNoiseLines or MaxNoiseBytes.
	ErrNoise = errors.New("scripted agent wrote too many lines that are not protocol lines")
)

// Options configures a Provider.
type Options struct {
	// Python runs ".py" scripts (default "python3", looked up in PATH).
	Python string
	// TurnTimeout bounds the time a program may spend on one turn, not
	// counting the daemon's time running its tool calls (0 = no limit).
	TurnTimeout time.Duration
	// MaxLine is the longest line accepted from a program, in bytes
	// without the newline (default 16 MiB).
	MaxLine int
	// StopGrace is how long Stop waits for a program to exit after closing
	// its stdin before killing it (default 5 s).
	StopGrace time.Duration
	// NoiseLogged is how many ignored (non-protocol) lines of one turn are
	// logged; the rest are counted and reported in one line at the end of
	// the turn (default 5).
	NoiseLogged int
	// MaxNoiseLines and MaxNoiseBytes bound the ignored lines of one turn:
	// past either, the program is killed and the turn fails with a
	// permanent error wrapping ErrNoise (defaults 1000 lines, 1 MiB).
	MaxNoiseLines int
	MaxNoiseBytes int
	// Logger receives the provider's logs; nil means no logging.
	Logger hclog.Logger
	// Spawner starts the programs (nil: the provider makes its own). A
	// daemon shares one among its providers.
	Spawner *agentproc.Spawner
}

// Provider is the scripted provider. It is safe for concurrent use.
type Provider struct {
	opts Options
	log  hclog.Logger
}

var _ provider.Provider = (*Provider)(nil)

// New returns a scripted Provider, filling defaults into opts.
func New(opts Options) *Provider {
	if opts.Python == "" {
		opts.Python = DefaultPython
	}
	if opts.MaxLine <= 0 {
		opts.MaxLine = DefaultMaxLine
	}
	if opts.StopGrace <= 0 {
		opts.StopGrace = DefaultStopGrace
	}
	if opts.NoiseLogged <= 0 {
		opts.NoiseLogged = DefaultNoiseLogged
	}
	if opts.MaxNoiseLines <= 0 {
		opts.MaxNoiseLines = DefaultMaxNoiseLines
	}
	if opts.MaxNoiseBytes <= 0 {
		opts.MaxNoiseBytes = DefaultMaxNoiseBytes
	}
	if opts.Spawner == nil {
		opts.Spawner = agentproc.NewSpawner()
	}
	log := opts.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return &Provider{opts: opts, log: log.Named("scripted")}
}

// Name implements provider.Provider.
func (p *Provider) Name() string { return "scripted" }

// Capabilities implements provider.Provider: no native resume, structured
// history, also given back with the (small) blob on Restore.
func (p *Provider) Capabilities() provider.Capabilities {
	return provider.Capabilities{NativeResume: false, StructuredHistory: true, HistoryOnRestore: true}
}

// Create implements provider.Provider. It checks the script and starts
// nothing; the process is spawned by the first Send.
func (p *Provider) Create(ctx context.Context, spec provider.Spec) (provider.Session, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("scripted create: %w", err)
	}
	script, err := ResolveScript(spec.Model)
	if err != nil {
		return nil, fmt.Errorf("scripted create: %w", err)
	}
	if err := checkHistoryMode(spec.HistoryMode); err != nil {
		return nil, fmt.Errorf("scripted create: %w", err)
	}
	s := p.newSession(spec, script, spec.History)
	s.log.Debug("session created", "history_turns", len(spec.History))
	return s, nil
}

// CheckModel implements provider.ModelChecker: the model is the script's
// path, which must name a regular file.
func (p *Provider) CheckModel(model string) error {
	script, err := ResolveScript(model)
	if err != nil {
		return err
	}
	return p.checkPython(script)
}

// checkPython fails fast, with ErrNoPython, when script is a ".py" file and
// the interpreter cannot be found.
func (p *Provider) checkPython(script string) error {
	if !isPython(script) {
		return nil
	}
	if _, err := exec.LookPath(p.opts.Python); err != nil {
		return fmt.Errorf("%w (looked for %q: %v)", ErrNoPython, p.opts.Python, err)
	}
	return nil
}

func isPython(script string) bool {
	return strings.HasSuffix(strings.ToLower(script), ".py")
}

// blob is the Suspend format: the script and the number of turns. Blobs
// written before the history moved out of them also carry it ("history"),
// and Restore still reads those.
type blob struct {
	Script  string          `json:"script"`
	Turns   int             `json:"turns"`
	History []provider.Turn `json:"history,omitempty"`
}

// Restore implements provider.Provider; see the package documentation for
// where the script and the history come from.
func (p *Provider) Restore(ctx context.Context, spec provider.Spec, data []byte, handle string) (provider.Session, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("scripted restore: %w", err)
	}
	var b blob
	if len(data) > 0 {
		if err := json.Unmarshal(data, &b); err != nil {
			return nil, fmt.Errorf("scripted restore: malformed suspend blob (%v): %w", err, provider.ErrCannotRestore)
		}
	}
	path := b.Script
	if path == "" {
		path = handle
	}
	if path == "" {
		path = spec.Model
	}
	if path == "" {
		return nil, fmt.Errorf("scripted restore: no script in the blob, the handle or the model: %w", provider.ErrCannotRestore)
	}
	script, err := ResolveScript(path)
	if err != nil {
		return nil, fmt.Errorf("scripted restore: %w", err)
	}
	if err := checkHistoryMode(spec.HistoryMode); err != nil {
		return nil, fmt.Errorf("scripted restore: %w", err)
	}
	hist := b.History
	if len(spec.History) > 0 {
		hist = spec.History
	}
	s := p.newSession(spec, script, hist)
	s.log.Debug("session restored", "from_blob", len(data) > 0, "history_turns", len(hist))
	return s, nil
}

func (p *Provider) newSession(spec provider.Spec, script string, hist []provider.Turn) *Session {
	argv := []string{script}
	if isPython(script) {
		argv = []string{p.opts.Python, script}
	}
	return &Session{
		opts:     p.opts,
		launcher: spec.Launcher,
		log:      p.log.With("script", script, "agent_id", spec.AgentID),
		script:   script,
		argv:     argv,
		env:      provider.ProcessEnv(os.Environ(), spec.Env),
		dir:      spec.Cwd,
		history:  slices.Clone(hist),
		agent:    newAgentLine(spec),

		contextMode: spec.HistoryMode == provider.HistoryContext,
	}
}

// ErrHistoryMode is wrapped by the error for a history mode that is
// neither "replay" nor "context".
var ErrHistoryMode = errors.New("unknown history mode")

// checkHistoryMode accepts "", "replay" and "context" (Spec.HistoryMode).
func checkHistoryMode(mode string) error {
	switch mode {
	case "", provider.HistoryReplay, provider.HistoryContext:
		return nil
	}
	return provider.Permanent(fmt.Errorf("%w %q: set the agent's metadata \"history\" (or the provider entry's \"history\" setting) to \"replay\" or \"context\"", ErrHistoryMode, mode))
}

// ResolveScript turns a model string into the absolute path of an existing
// regular file: a relative path is taken relative to the current working
// directory. It returns errors wrapping ErrNoScript or ErrScriptNotFound.
func ResolveScript(model string) (string, error) {
	if model == "" {
		return "", ErrNoScript
	}
	abs, err := filepath.Abs(model)
	if err != nil {
		return "", fmt.Errorf("%w: %q: %v", ErrScriptNotFound, model, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("%w: %q (resolved to %s): %v; give an absolute path or one relative to the daemon's working directory", ErrScriptNotFound, model, abs, err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%w: %q (resolved to %s) is not a regular file", ErrScriptNotFound, model, abs)
	}
	return abs, nil
}

//go:embed python/warren_script.py python/substrat_script.py
var helpers embed.FS

// ErrHelperDirLink is WriteHelpers' error for a directory that is a
// symbolic link.
var ErrHelperDirLink = errors.New("is a symbolic link")

// WriteHelpers writes the Python helper modules warren_script.py and
// substrat_script.py into dir (which must exist), replacing older copies.
// Put dir on the scripts' PYTHONPATH (through Spec.Env) to use them.
//
// Nothing is written through a symbolic link: dir itself must be a
// directory, not a link to one (ErrHelperDirLink, with what to do), and
// each file is replaced atomically (package atomicfile: a temporary file
// renamed over the name), so a link at a helper's name is replaced by the
// helper and its target is left as it is.
func WriteHelpers(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("scripted: installing helpers: %w", err)
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		target, _ := os.Readlink(dir)
		return fmt.Errorf("scripted: installing helpers: %s %w (to %s); the helpers are never written through a link: remove the link (rm %s) and start again",
			dir, ErrHelperDirLink, target, dir)
	}
	if !fi.IsDir() {
		return fmt.Errorf("scripted: installing helpers: %s is not a directory; move it away and start again", dir)
	}
	for _, name := range []string{"warren_script.py", "substrat_script.py"} {
		data, err := helpers.ReadFile("python/" + name)
		if err != nil {
			return fmt.Errorf("scripted: reading embedded helper %s: %w", name, err)
		}
		if err := atomicfile.Write(faultfs.OS{}, filepath.Join(dir, name), data, 0o644); err != nil {
			return fmt.Errorf("scripted: installing helper: %w", err)
		}
	}
	return nil
}
