package config

import "testing"

// TestMaxOpenLogsFor: the open-log cap leaves a quarter of the descriptor
// limit (at least MinFileReserve) to the rest of the daemon and gives the
// logs half of what remains, between MinOpenLogs and DefaultMaxOpenLogs.
func TestMaxOpenLogsFor(t *testing.T) {
	for _, tc := range []struct {
		nofile uint64
		want   int
	}{
		{0, DefaultMaxOpenLogs},
		{1 << 20, DefaultMaxOpenLogs},
		{4096, DefaultMaxOpenLogs},
		{1024, 384},
		{300, 86},
		{200, 36},
		{160, MinOpenLogs},
		{100, MinOpenLogs},
		{1, MinOpenLogs},
	} {
		got := MaxOpenLogsFor(tc.nofile)
		if got != tc.want {
			t.Errorf("MaxOpenLogsFor(%d) = %d, want %d", tc.nofile, got, tc.want)
		}
		if tc.nofile >= 300 && uint64(2*got) > tc.nofile-MinFileReserve {
			t.Errorf("MaxOpenLogsFor(%d) = %d leaves less than %d descriptors to the rest", tc.nofile, got, MinFileReserve)
		}
	}
}
