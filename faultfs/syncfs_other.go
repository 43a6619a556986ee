//go:build !linux

package faultfs

import (
	"errors"
	"fmt"
)

// SyncFS is not available here: callers sync file by file.
func (OS) SyncFS(name string) error {
	return fmt.Errorf("faultfs: syncfs is Linux only: %w", errors.ErrUnsupported)
}
