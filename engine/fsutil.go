package engine

import (
	"github.com/warren-dev/warren/atomicfile"
	"github.com/warren-dev/warren/faultfs"
)

func cleanTemps(fsys faultfs.FS, dir string) error { return atomicfile.CleanTemps(fsys, dir) }
