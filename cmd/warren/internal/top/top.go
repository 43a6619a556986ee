// Package top is `warren top` (SPEC 14): a live view of the team in the
// terminal, over the socket: the tree with status, provider and model,
// each agent's latest event, tokens, pending messages and the waits,
// refreshed as events.subscribe reports entries; keys answer a wait,
// resume an interrupted run, cancel a turn and follow one agent's stream.
// The screen is drawn by Bubble Tea.
package top

import (
	"context"
	"io"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/warren-dev/warren/cmd/warren/internal/client"
	"github.com/warren-dev/warren/protocol"
)

// Run shows the view until the user quits (q or Ctrl-C) or ctx ends.
func Run(ctx context.Context, d *client.Client, in io.Reader, out io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	m := newModel(ctx, d)
	p := tea.NewProgram(m, tea.WithContext(ctx), tea.WithInput(in), tea.WithOutput(out), tea.WithAltScreen())
	go follow(ctx, d, p)
	_, err := p.Run()
	if err != nil && ctx.Err() != nil {
		return nil // quit
	}
	return err
}

// follow feeds every logged event (and streamed text) to the program,
// subscribing again while the daemon is away.
func follow(ctx context.Context, d *client.Client, p *tea.Program) {
	for ctx.Err() == nil {
		cl, err := d.Dial(ctx)
		if err == nil {
			err = cl.Stream(ctx, "events.subscribe", map[string]any{"ready": true, "deltas": true}, func(fr protocol.Frame) error {
				if fr.Event != nil {
					p.Send(eventMsg(fr.Event))
				}
				return nil
			})
			cl.Close()
		}
		p.Send(streamEnded{err})
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}
