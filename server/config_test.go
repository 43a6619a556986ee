package server

import (
	"os"
	"testing"
	"time"

	"github.com/warren-dev/warren/protocol"
)

func TestConfigDefaults(t *testing.T) {
	c := Config{}.withDefaults()
	if c.MaxConns != DefaultMaxConns || c.MaxInflight != DefaultMaxInflight || c.MaxFrame != protocol.MaxFrame ||
		c.ReadTimeout != DefaultReadTimeout || c.IdleTimeout != DefaultIdleTimeout || c.WriteTimeout != DefaultWriteTimeout {
		t.Fatalf("defaults %+v", c)
	}
	if !c.AllowUID(os.Getuid()) || c.AllowUID(os.Getuid()+1) {
		t.Fatal("default AllowUID must allow exactly the process's own uid")
	}
	c = Config{ReadTimeout: -1, IdleTimeout: -1, WriteTimeout: time.Second, MaxFrame: 1 << 30}.withDefaults()
	if c.ReadTimeout != 0 || c.IdleTimeout != 0 || c.WriteTimeout != time.Second || c.MaxFrame != protocol.MaxFrame {
		t.Fatalf("negative timeouts must disable, explicit ones stay, MaxFrame is capped: %+v", c)
	}
}
