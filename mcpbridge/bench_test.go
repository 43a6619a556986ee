package mcpbridge

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"testing"
)

// BenchmarkToolsCall measures one tools/call through the bridge to a
// daemon socket and back (a fresh connection per call, as in production):
// the bridge's overhead on every warren tool call an agent CLI makes.
func BenchmarkToolsCall(b *testing.B) {
	d := startFakeDaemon(b, agentDaemon)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	go func() {
		_ = Serve(context.Background(), inR, outW, Options{Caller: NewDaemon(Config{Socket: d.sock, Credential: "wac_live"})})
		outW.Close()
	}()
	r := bufio.NewReader(outR)
	b.ResetTimer()
	for i := range b.N {
		fmt.Fprintf(inW, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"send_message","arguments":{"recipient":"p","text":"hi"}}}`+"\n", i)
		if _, err := r.ReadBytes('\n'); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	inW.Close()
}
