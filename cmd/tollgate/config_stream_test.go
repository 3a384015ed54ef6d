package main

import (
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestStreamStallFlags: the stalled-stream flags of SPEC §1.4, their
// defaults, units, environment variables and refusals.
func TestStreamStallFlags(t *testing.T) {
	cfg, err := parseServe(nil, io.Discard)
	require.NoError(t, err)
	require.Equal(t, 60*time.Second, cfg.StreamStallTimeout)
	require.Equal(t, int64(4<<20), cfg.StreamBufferLimit)

	cfg, err = parseServe([]string{"--stream-stall-timeout", "0", "--stream-buffer-limit", "64KiB"}, io.Discard)
	require.NoError(t, err)
	require.Zero(t, cfg.StreamStallTimeout)
	require.Equal(t, int64(64<<10), cfg.StreamBufferLimit)

	t.Setenv("TOLLGATE_STREAM_STALL_TIMEOUT", "2.5s")
	t.Setenv("TOLLGATE_STREAM_BUFFER_LIMIT", "1MiB")
	cfg, err = parseServe([]string{"--stream-buffer-limit", "1000"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, 2500*time.Millisecond, cfg.StreamStallTimeout)
	require.Equal(t, int64(1000), cfg.StreamBufferLimit, "the flag wins over the variable")

	for _, bad := range [][]string{
		{"--stream-stall-timeout", "soon"},
		{"--stream-buffer-limit", "4MB"},
		{"--stream-buffer-limit", "0"},
		{"--stream-buffer-limit", "-1"},
	} {
		_, err := parseServe(bad, io.Discard)
		require.Error(t, err, "%v", bad)
	}
}

// TestCacheSizeFlags: the payload and group cache bounds, their defaults,
// 0 for none (handed to the engine and the store as -1), and the range.
func TestCacheSizeFlags(t *testing.T) {
	cfg, err := parseServe(nil, io.Discard)
	require.NoError(t, err)
	require.Equal(t, int64(8<<20), cfg.PayloadCacheSize)
	require.Equal(t, int64(64<<20), cfg.GroupCacheSize)
	require.Equal(t, int64(64<<20), cfg.MappedTableLimit)

	t.Setenv("TOLLGATE_GROUP_CACHE_SIZE", "8MiB")
	cfg, err = parseServe([]string{"--payload-cache-size", "0"}, io.Discard)
	require.NoError(t, err)
	require.Zero(t, cfg.PayloadCacheSize)
	require.Equal(t, int64(8<<20), cfg.GroupCacheSize)
	require.Equal(t, -1, cacheBound(cfg.PayloadCacheSize), "0 reaches the engine as none, not as its default")
	require.Equal(t, 8<<20, cacheBound(cfg.GroupCacheSize))

	for _, bad := range [][]string{
		{"--payload-cache-size", "-1"},
		{"--payload-cache-size", "3GiB"},
		{"--group-cache-size", "lots"},
	} {
		_, err := parseServe(bad, io.Discard)
		require.Error(t, err, "%v", bad)
	}
}
