//go:build !linux

package faultfs

import (
	"errors"
	"fmt"
)

// OpenFS is not available here: callers sync file by file.
func (OS) OpenFS(name string) (FileSystem, error) {
	return nil, fmt.Errorf("faultfs: syncfs is Linux only: %w", errors.ErrUnsupported)
}
