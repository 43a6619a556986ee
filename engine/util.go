package engine

import "github.com/warren-dev/warren/engine/internal/roster"

func notFound(ref string) error { return roster.NotFound(ref) }
