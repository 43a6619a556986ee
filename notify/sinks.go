package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/warren-dev/warren/config"
)

// ErrSink marks a sink that did not take a notification.
var ErrSink = errors.New("notification sink")

// sendTimeout bounds one delivery.
const sendTimeout = 10 * time.Second

// Sink delivers notifications somewhere.
type Sink interface {
	Name() string
	Send(ctx context.Context, n Notification) error
}

// NewSinks makes the sinks of config.json's "notify"; getenv reads a
// webhook's secret_env (os.Getenv in the daemon). env is the environment
// of a command sink's process (the agent processes' allow-list: a command
// gets no more of the daemon's environment than an agent does).
func NewSinks(cfg []config.NotifySink, getenv func(string) string, env []string) []Sink {
	var out []Sink
	for _, c := range cfg {
		switch c.Type {
		case "command":
			out = append(out, &commandSink{name: c.Name, argv: c.Argv, env: env})
		case "webhook":
			h := http.Header{}
			for k, v := range c.Headers {
				h.Set(k, v)
			}
			h.Set("Content-Type", "application/json")
			w := &webhookSink{name: c.Name, url: c.URL, header: h, client: &http.Client{Timeout: sendTimeout,
				CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
			w.secretEnv, w.secretHeader, w.getenv = c.SecretEnv, c.SecretHeader, getenv
			out = append(out, w)
		}
	}
	return out
}

// commandSink runs argv with the notification as JSON on its standard
// input; exit status 0 acknowledges it.
type commandSink struct {
	name string
	argv []string
	env  []string
}

func (s *commandSink) Name() string { return s.name }

func (s *commandSink) Send(ctx context.Context, n Notification) error {
	body, err := json.Marshal(n)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, sendTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.argv[0], s.argv[1:]...)
	cmd.Env = s.env
	cmd.Stdin = bytes.NewReader(append(body, '\n'))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%w %s: %s: %v: %s", ErrSink, s.name, strings.Join(s.argv, " "), err, tail(out.String()))
	}
	return nil
}

// webhookSink POSTs the notification; a 2xx status acknowledges it.
type webhookSink struct {
	name, url string
	header    http.Header
	// secretEnv ("" = none) names the variable whose value (read by
	// getenv at each send) goes in the header secretHeader.
	secretEnv, secretHeader string
	getenv                  func(string) string
	client                  *http.Client
}

func (s *webhookSink) Name() string { return s.name }

func (s *webhookSink) Send(ctx context.Context, n Notification) error {
	body, err := json.Marshal(n)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%w %s: %v", ErrSink, s.name, err)
	}
	req.Header = s.header.Clone()
	if s.secretEnv != "" {
		v := s.getenv(s.secretEnv)
		if v == "" {
			return fmt.Errorf("%w %s: the variable %s (its secret_env) is not set in the daemon's environment", ErrSink, s.name, s.secretEnv)
		}
		req.Header.Set(s.secretHeader, v)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		// The URL is the operator's; the error names it, never a header.
		return fmt.Errorf("%w %s: %v", ErrSink, s.name, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%w %s: %s answered %d", ErrSink, s.name, s.url, resp.StatusCode)
	}
	return nil
}

func tail(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 200 {
		s = "..." + s[len(s)-200:]
	}
	return s
}
