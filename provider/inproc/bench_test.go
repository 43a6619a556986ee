package inproc

import (
	"context"
	"testing"

	"github.com/warren-dev/warren/provider"
)

func BenchmarkEchoSend(b *testing.B) {
	p := New("bench", Options{})
	s, err := p.Create(context.Background(), provider.Spec{Model: "echo"})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := s.Send(context.Background(), "hello", provider.TurnIO{}); err != nil {
			b.Fatal(err)
		}
	}
}
