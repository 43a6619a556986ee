//go:build !nocluster

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/warren-dev/warren/agentspec"
	"github.com/warren-dev/warren/builtins"
	"github.com/warren-dev/warren/cmd/warren/internal/exit"
	"github.com/warren-dev/warren/cmd/warren/internal/usage"
	"github.com/warren-dev/warren/config"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider/remote"
	"github.com/warren-dev/warren/registry"
	"github.com/warren-dev/warren/store/jetstream/natsembed"
	"github.com/warren-dev/warren/worker"
)

func newWorkerCmd(c *cli) *cobra.Command {
	var join, pools, labels, id, level, tokenFile string
	var tls natsembed.TLSFiles
	cmd := &cobra.Command{
		Use:   "worker --join nats://HOST:PORT --pools ENTRY=N[,...] --token-file FILE [--id NAME] [--labels k=v,...]",
		Short: "run agent sessions for a cluster's daemon on this machine",
		Long: `Run agent processes for the active daemon of a cluster on this machine: the
daemon keeps every log, the fold and the tools; the worker starts the agents'
processes and streams their turns back. --join is a NATS server of the
cluster (a daemon's --cluster-embedded server, or --cluster's URL); --pools
names the provider entries this worker serves and how many sessions of each
it holds at once. Provider entries are read from this home's config.json
(env_pass and env apply on this machine). Agents whose working directory is
not on this machine run in <home>/worker-<id>/agents/<agent id>. The
token (--token-file, or $WARREN_WORKER_TOKEN) comes from
` + "`warren worker token ID`" + ` on the daemon's machine.

When a worker stops answering (a kill, a lost network), the daemon opens its
agents' sessions again on another worker, or locally, restored from their
logs, and retries the turn; tool calls already made are answered from the
log, never run twice. See docs/WORKERS.md.`,
		Example: indent("warren worker --join nats://10.0.0.5:4222 --id w1 --token-file w1.token --pools claude=4,scripted=16\nwarren worker --join nats://127.0.0.1:4222 --id w1 --token-file w1.token --pools scripted=4 --labels zone=lab"),
		Args:    usage.Args(0, 0),
	}
	f := cmd.Flags()
	f.StringVar(&join, "join", "", "a NATS server of the cluster (nats://host:port[,...])")
	f.StringVar(&pools, "pools", "", "provider entries served and their sizes (claude=4,scripted=16)")
	f.StringVar(&labels, "labels", "", "labels placement can ask for (k=v,...)")
	f.StringVar(&id, "id", "", "this worker's id (default: the host name)")
	f.StringVar(&level, "log-level", "info", "log level: trace, debug, info, warn, error")
	f.StringVar(&tokenFile, "token-file", "", "the file holding this worker's token (`warren worker token ID` on the daemon's machine); default: $WARREN_WORKER_TOKEN")
	f.StringVar(&tls.Cert, "nats-tls-cert", "", "this worker's TLS client certificate (PEM), for a cluster with TLS")
	f.StringVar(&tls.Key, "nats-tls-key", "", "the key of --nats-tls-cert (PEM)")
	f.StringVar(&tls.CA, "nats-tls-ca", "", "the CA of the cluster's certificates (PEM)")
	cmd.RunE = c.runE(func(ctx context.Context, cmd *cobra.Command, _ []string) error {
		if join == "" {
			return exit.Usagef(cmd.UseLine(), "--join is required: a NATS server of the cluster, e.g. nats://127.0.0.1:4222")
		}
		ps, err := parsePairs("--pools", pools)
		if err != nil {
			return exit.Usagef(cmd.UseLine(), "%v", err)
		}
		sizes := map[string]int{}
		for k, v := range ps {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 4096 {
				return exit.Usagef(cmd.UseLine(), "--pools %s=%s: give a size from 1 to 4096", k, v)
			}
			sizes[k] = n
		}
		ls, err := parsePairs("--labels", labels)
		if err != nil {
			return exit.Usagef(cmd.UseLine(), "%v", err)
		}
		if id == "" {
			if id, err = os.Hostname(); err != nil {
				return err
			}
			id = strings.NewReplacer(".", "-").Replace(id)
		}
		if err := remote.CheckID(id); err != nil {
			return exit.Usagef(cmd.UseLine(), "--id: %v", err)
		}
		if hclog.LevelFromString(level) == hclog.NoLevel {
			return exit.Usagef(cmd.UseLine(), "unknown --log-level %q (use trace, debug, info, warn or error)", level)
		}
		token := os.Getenv("WARREN_WORKER_TOKEN")
		if tokenFile != "" {
			data, err := os.ReadFile(tokenFile)
			if err != nil {
				return exit.Usagef(cmd.UseLine(), "--token-file: %v", err)
			}
			token = string(data)
		}
		if token == "" {
			return exit.Usagef(cmd.UseLine(), "no token: run `warren worker token %s` on the daemon's machine and pass it with --token-file (or $WARREN_WORKER_TOKEN)", id)
		}
		key, daemonKey, err := remote.ParseToken(token)
		if err != nil {
			return exit.Usagef(cmd.UseLine(), "%v", err)
		}
		return runWorker(ctx, c, worker.Options{ID: id, Key: key, DaemonKey: daemonKey, Pools: sizes, Labels: ls}, join, tls, level)
	})
	cmd.AddCommand(newWorkerTokenCmd(c))
	return cmd
}

func newWorkerTokenCmd(c *cli) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token ID",
		Short: "issue the token worker ID joins with (on the daemon's machine; replaces an earlier one)",
		Long: `Make a key pair for worker ID, record its public key in the home's
workers.json, and print the token, once. Give the token to the worker
(--token-file or $WARREN_WORKER_TOKEN): the daemon places sessions only on a
worker whose heartbeats are signed with its token's key. The key is also
the worker's NATS user on the daemon's embedded servers, which let it use
only its own subjects. Issuing it again replaces the key: the old token
stops working. In a cluster, copy workers.json to every node, as
config.json.`,
		Example: indent("warren worker token w1 > w1.token\nscp w1.token gpu-box: && ssh gpu-box warren worker --id w1 --token-file w1.token --join nats://10.0.0.5:4222 --pools scripted=16"),
		Args:    usage.Args(1, 1),
	}
	cmd.RunE = c.runE(func(_ context.Context, _ *cobra.Command, args []string) error {
		if err := os.MkdirAll(c.home, 0o700); err != nil {
			return err
		}
		token, err := remote.IssueToken(faultfs.OS{}, filepath.Join(c.home, remote.KeysFile), args[0])
		if err != nil {
			return &exit.Error{Code: exit.Usage, Err: err, Msg: err.Error()}
		}
		fmt.Fprintln(c.stdout, token)
		return nil
	})
	return cmd
}

// runWorker connects to NATS, builds the worker's registry from the
// home's config.json and serves until ctx ends (a signal).
func runWorker(ctx context.Context, c *cli, o worker.Options, join string, tls natsembed.TLSFiles, level string) error {
	logger := hclog.New(&hclog.LoggerOptions{Name: "warren-worker", Level: hclog.LevelFromString(level), Output: c.stderr})
	cfg, err := config.Load(faultfs.OS{}, filepath.Join(c.home, "config.json"))
	if err != nil {
		return &exit.Error{Code: exit.DaemonErr, Err: err, Msg: err.Error()}
	}
	dir := filepath.Join(c.home, "worker-"+o.ID)
	pyDir := filepath.Join(dir, "python")
	if err := os.MkdirAll(pyDir, 0o700); err != nil {
		return err
	}
	static, err := builtins.Providers(registry.Env{Config: cfg, Logger: logger, PythonDir: pyDir})
	if err != nil {
		return err
	}
	reg := registry.New(registry.Options{Static: static, Config: func() config.Config { return cfg }, Logger: logger})
	// The connection is made again forever, through refusals too (a node
	// whose workers.json lacks this worker's key may refuse it while
	// others let it in); should it close all the same, the worker exits
	// with an error, so that whatever supervises it starts it again.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	connOpts := []nats.Option{nats.Name("warren worker " + o.ID), nats.MaxReconnects(-1), nats.ReconnectWait(100 * time.Millisecond),
		nats.CustomInboxPrefix(remote.InboxPrefix(o.ID)), nats.IgnoreAuthErrorAbort(),
		nats.ClosedHandler(func(nc *nats.Conn) {
			cancel(fmt.Errorf("the connection to NATS closed (%v): exiting so that the worker is started again", nc.LastError()))
		})}
	if tls.Cert != "" || tls.Key != "" || tls.CA != "" {
		if err := tls.Check(); err != nil {
			return &exit.Error{Code: exit.Usage, Err: err, Msg: "--nats-tls-cert, --nats-tls-key, --nats-tls-ca: " + err.Error()}
		}
		connOpts = append(connOpts, tls.ClientOptions()...)
	}
	nc, err := natsembed.Connect(join, o.Key, connOpts...)
	if err != nil {
		return &exit.Error{Code: exit.DaemonErr, Err: err, Msg: fmt.Sprintf("connecting to %s: %v", join, err)}
	}
	defer nc.Close()
	o.Conn, o.Lookup, o.Config, o.Logger, o.Dir = nc, reg.Lookup, func() config.Config { return cfg }, logger, dir
	o.Env = agentspec.Env{PythonPath: pyDir}
	w, err := worker.New(o)
	if err != nil {
		return &exit.Error{Code: exit.Usage, Err: err, Msg: err.Error()}
	}
	if err := w.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return &exit.Error{Code: exit.DaemonErr, Err: err, Msg: err.Error()}
	}
	return nil
}

// parsePairs reads "k=v,k2=v2" ("" is none).
func parsePairs(flag, s string) (map[string]string, error) {
	out := map[string]string{}
	if s == "" {
		return out, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("%s %q: give key=value pairs separated by commas", flag, kv)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("%s: %q is given twice", flag, k)
		}
		out[k] = v
	}
	return out, nil
}
