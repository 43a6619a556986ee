// Package attach is `warren agent attach`: an interactive conversation
// with one agent over one connection. Each line read is a message sent
// with agent.stream; the response streams back as the model writes it,
// with the retries and waits of the turn (and the waits that begin below
// the agent) on stderr (package notices). An empty line, end of input or
// Ctrl-C detaches; the turns go on in the daemon.
package attach

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/warren-dev/warren/cmd/warren/internal/client"
	"github.com/warren-dev/warren/cmd/warren/internal/notices"
	"github.com/warren-dev/warren/cmd/warren/internal/reply"
	"github.com/warren-dev/warren/protocol"
)

// Session is one attach: where it reads lines, prints the responses and
// the notices.
type Session struct {
	Daemon  *client.Client
	Notices notices.Config
	Stdin   io.Reader
	Stdout  io.Writer
	Stderr  io.Writer
	JSON    bool // print the stream's frames as JSON objects, no prompts
}

// Run attaches to the agent ref until the user detaches.
func (s *Session) Run(ctx context.Context, ref string) error {
	cl, err := s.Daemon.Dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	insp, err := cl.Call(ctx, "agent.inspect", map[string]any{"agent_id": ref})
	if err != nil {
		return client.RPCError("agent.inspect", err)
	}
	notes, stop := notices.Watch(ctx, s.Notices, reply.Str(insp, "agent_id"), true, false)
	defer stop()
	if !s.JSON {
		fmt.Fprintf(s.Stdout, "attached to %s (empty line or Ctrl-D to detach)\n", ref)
	}
	lines := s.readLines(ctx)
	for {
		if !s.JSON {
			fmt.Fprint(s.Stdout, "> ")
		}
		var line string
		var ok bool
		select {
		case line, ok = <-lines:
		case <-ctx.Done():
			ok = false
		}
		if !ok || strings.TrimSpace(line) == "" {
			if !s.JSON {
				fmt.Fprintf(s.Stdout, "\ndetached from %s\n", ref)
			}
			return nil
		}
		if err := s.turn(ctx, cl, notes, ref, line); err != nil {
			return err
		}
	}
}

// readLines sends the lines of Stdin until it ends or ctx does.
func (s *Session) readLines(ctx context.Context) <-chan string {
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(s.Stdin)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	return lines
}

// turn sends one line and prints the response as it streams. A failed
// turn is printed and the session goes on, unless the daemon stopped.
func (s *Session) turn(ctx context.Context, cl *protocol.Client, notes *notices.Watcher, ref, line string) error {
	err := cl.Stream(ctx, "agent.stream", map[string]any{"agent_id": ref, "message": line}, func(fr protocol.Frame) error {
		if s.JSON {
			return reply.JSON(s.Stdout, reply.Frame(fr))
		}
		if fr.Chunk != "" {
			fmt.Fprint(s.Stdout, fr.Chunk)
		}
		notes.StreamFrame(fr)
		return nil
	})
	if !s.JSON {
		fmt.Fprintln(s.Stdout)
	}
	if err == nil || ctx.Err() != nil {
		return nil
	}
	if stopped := s.Daemon.Stopped(ctx); stopped != nil {
		return stopped
	}
	fmt.Fprintf(s.Stderr, "error: %s\n", client.RPCError("agent.stream", err))
	return nil
}
