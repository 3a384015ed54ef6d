package http

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// sendQueueOf reads a socket's send queue: bytes not yet acknowledged by
// the peer (SIOCOUTQ).
func sendQueueOf(raw syscall.RawConn) func() (int64, bool) {
	return func() (int64, bool) {
		var n int
		var err error
		if cerr := raw.Control(func(fd uintptr) { n, err = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ) }); cerr != nil || err != nil {
			return 0, false
		}
		return int64(n), true
	}
}
