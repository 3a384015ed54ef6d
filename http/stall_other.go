//go:build !linux

package http

import "syscall"

// sendQueueOf cannot read a send queue on this system: only writes that
// block count as unwritten.
func sendQueueOf(syscall.RawConn) func() (int64, bool) { return nil }
