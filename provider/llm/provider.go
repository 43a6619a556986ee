package llm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/tools"
)

// Settings are an entry's settings, read again for every request so that a
// config reload applies to the next turn (SPEC 10).
type Settings struct {
	BaseURL string
	// APIKeyEnv names the environment variable holding the key ("": the
	// entry sends none).
	APIKeyEnv string
	// Model is the entry's default model (the daemon uses it at create).
	Model string
	// MaxTokens caps a response's output tokens (0: the wire's default).
	MaxTokens int
	// Headers are extra request headers (non-secret).
	Headers map[string]string
	// Timeout is the idle timeout: no byte from the server for this long
	// (waiting for the response headers or inside the stream) is a
	// transient error. 0: DefaultTimeout.
	Timeout time.Duration
	// ContextBudget is the estimated token count a request may reach
	// before the oldest completed turns are left out. 0: DefaultBudget.
	ContextBudget int
	// MessageBytes is the message limit (config limits.message_bytes):
	// the most text one model step may send (the turn's response is its
	// last step's text) and the largest arguments of one tool call. 0:
	// DefaultMessageBytes.
	MessageBytes int
	// TurnBytes is the per-turn transcript budget (config
	// limits.turn_transcript_bytes): the bytes of the turn's own messages
	// (its steps' text, tool calls and results) that every step sends
	// again. 0: DefaultTurnBytes.
	TurnBytes int
}

// Defaults of Settings and Options.
const (
	DefaultTimeout        = 120 * time.Second
	DefaultBudget         = 100_000
	DefaultConnectTimeout = 10 * time.Second
	DefaultMaxLine        = 16 << 20
	DefaultMaxResponse    = 64 << 20
	DefaultMaxSteps       = 100
	// DefaultMessageBytes and DefaultTurnBytes are the defaults of the
	// config's limits.message_bytes and limits.turn_transcript_bytes.
	DefaultMessageBytes = 1 << 20
	DefaultTurnBytes    = 32 << 20
	// BytesPerToken is the estimate used for the context budget.
	BytesPerToken = 4
)

// Options configures a Provider (one provider entry).
type Options struct {
	// Name is the entry's name (errors and logs name it).
	Name string
	Wire Wire
	// Settings returns the entry's current settings.
	Settings func() Settings
	// Getenv reads the key variable (default os.Getenv).
	Getenv func(string) string
	// Client sends the requests; nil means a client with the entry's own
	// keep-alive connection pool, no redirects, ConnectTimeout for dials.
	Client         *http.Client
	ConnectTimeout time.Duration
	// MaxLine bounds one line of the response stream; MaxResponse bounds a
	// whole response.
	MaxLine     int
	MaxResponse int64
	// MaxSteps bounds the model steps of one turn.
	MaxSteps int
	Logger   hclog.Logger
	Now      func() time.Time
}

// Provider is one HTTP provider entry. It is safe for concurrent use.
type Provider struct {
	opts   Options
	wire   Wire
	client *http.Client
	log    hclog.Logger
	tools  []tools.Spec
	known  map[string]bool
}

var _ provider.Provider = (*Provider)(nil)

// errRedirect refuses redirects: a key must never follow one to another
// host, and a redirected POST would lose its body anyway.
var errRedirect = errors.New("the server answered with a redirect; set base_url to the final URL")

// New returns a Provider for one entry.
func New(opts Options) *Provider {
	if opts.Getenv == nil {
		opts.Getenv = os.Getenv
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = DefaultConnectTimeout
	}
	if opts.MaxLine <= 0 {
		opts.MaxLine = DefaultMaxLine
	}
	if opts.MaxResponse <= 0 {
		opts.MaxResponse = DefaultMaxResponse
	}
	if opts.MaxSteps <= 0 {
		opts.MaxSteps = DefaultMaxSteps
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Settings == nil {
		opts.Settings = func() Settings { return Settings{} }
	}
	log := opts.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	client := opts.Client
	if client == nil {
		client = NewClient(opts.ConnectTimeout)
	}
	cat := tools.Catalog()
	known := make(map[string]bool, len(cat))
	for _, t := range cat {
		known[t.Name] = true
	}
	return &Provider{opts: opts, wire: opts.Wire, client: client, log: log.Named(opts.Wire.Type()).With("entry", opts.Name),
		tools: cat, known: known}
}

// NewClient returns an HTTP client with its own keep-alive pool, a connect
// timeout, no redirects, and a proxy (from HTTPS_PROXY) only for https URLs:
// through a CONNECT tunnel the key stays end-to-end encrypted to the entry's
// host, while a plain-http proxy would see it.
func NewClient(connect time.Duration) *http.Client {
	tr := &http.Transport{
		Proxy: func(r *http.Request) (*neturl.URL, error) {
			if r.URL.Scheme != "https" {
				return nil, nil
			}
			return http.ProxyFromEnvironment(r)
		},
		DialContext:           (&net.Dialer{Timeout: connect, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   connect,
		MaxIdleConns:          64,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{
		Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return errRedirect
		},
	}
}

// Name implements provider.Provider: the entry's name.
func (p *Provider) Name() string { return p.opts.Name }

// Settings returns the entry's current settings with defaults filled in.
func (p *Provider) Settings() Settings {
	st := p.opts.Settings()
	if st.Timeout <= 0 {
		st.Timeout = DefaultTimeout
	}
	if st.ContextBudget <= 0 {
		st.ContextBudget = DefaultBudget
	}
	if st.MessageBytes <= 0 {
		st.MessageBytes = DefaultMessageBytes
	}
	if st.TurnBytes <= 0 {
		st.TurnBytes = DefaultTurnBytes
	}
	return st
}

// Capabilities implements provider.Provider: the history goes back as
// native messages in every request; nothing is resumed natively.
func (p *Provider) Capabilities() provider.Capabilities {
	return provider.Capabilities{NativeResume: false, StructuredHistory: true}
}

// Create implements provider.Provider. It contacts no server.
func (p *Provider) Create(ctx context.Context, spec provider.Spec) (provider.Session, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%s create: %w", p.opts.Name, err)
	}
	if spec.Model == "" {
		return nil, provider.Permanent(fmt.Errorf("provider entry %q has no model: give one with --model or set providers.%s.model in config.json", p.opts.Name, p.opts.Name))
	}
	return p.newSession(spec), nil
}

// Restore implements provider.Provider: the history comes from
// spec.History (the daemon rebuilds it from the log); the blob and the
// handle are not needed.
func (p *Provider) Restore(ctx context.Context, spec provider.Spec, _ []byte, _ string) (provider.Session, error) {
	return p.Create(ctx, spec)
}

func (p *Provider) now() time.Time { return p.opts.Now() }
