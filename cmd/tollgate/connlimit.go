package main

import (
	"net"
	"net/http"
	"sync"
	"syscall"
)

// connLimiter caps the open client connections so that the descriptors
// the store needs (tables, logs, the memtable it rotates to) are never
// taken by clients: without it, once descriptors ran out badger's
// memtable rotation failed and the process exited.
//
// At the cap, Accept first closes one idle keep-alive connection (clients
// reopen those at no cost, as after an idle timeout) and otherwise waits
// for a connection to end; new connections meanwhile wait in the kernel's
// accept queue.
type connLimiter struct {
	net.Listener
	slots chan struct{}
	done  chan struct{}
	once  sync.Once

	mu   sync.Mutex
	idle map[net.Conn]struct{}
}

// newConnLimiter wraps ln to hold at most max connections open.
func newConnLimiter(ln net.Listener, max int) *connLimiter {
	return &connLimiter{Listener: ln, slots: make(chan struct{}, max), done: make(chan struct{}),
		idle: make(map[net.Conn]struct{})}
}

// Accept waits for a free slot, then accepts a connection.
func (l *connLimiter) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	default:
		l.closeOneIdle()
		select {
		case l.slots <- struct{}{}:
		case <-l.done:
			return nil, net.ErrClosed
		}
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitedConn{Conn: c, l: l}, nil
}

// Close closes the listener and wakes a waiting Accept.
func (l *connLimiter) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// trackState is the http.Server's ConnState hook: it keeps the set of idle
// keep-alive connections that closeOneIdle may close.
func (l *connLimiter) trackState(c net.Conn, state http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if state == http.StateIdle {
		l.idle[c] = struct{}{}
	} else {
		delete(l.idle, c)
	}
}

func (l *connLimiter) closeOneIdle() {
	l.mu.Lock()
	var victim net.Conn
	for c := range l.idle {
		victim = c
		delete(l.idle, c)
		break
	}
	l.mu.Unlock()
	if victim != nil {
		_ = victim.Close()
	}
}

// limitedConn gives its slot back when it is closed (once).
type limitedConn struct {
	net.Conn
	l    *connLimiter
	once sync.Once
}

// NetConn is the accepted connection, as tls.Conn's NetConn is: the take
// stream's stall watch unwraps it to read the socket's send queue.
func (c *limitedConn) NetConn() net.Conn { return c.Conn }

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.idle, c)
		c.l.mu.Unlock()
		<-c.l.slots
	})
	return err
}

// storeDescriptorReserve is how many descriptors are kept from clients for
// the store and the process itself: a quarter of the limit, at least 64 and
// at most 1024 (a store's open tables, logs and memtables are far fewer).
func storeDescriptorReserve(limit uint64) uint64 {
	return min(max(limit/4, 64), 1024)
}

// defaultMaxConnections derives the connection cap from RLIMIT_NOFILE (the
// soft limit, which the Go runtime raised to the hard one at start).
func defaultMaxConnections() (int, uint64) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur >= 1<<40 {
		return 1 << 16, 0
	}
	reserve := storeDescriptorReserve(rl.Cur)
	if rl.Cur <= reserve+16 {
		return 16, rl.Cur
	}
	return int(min(rl.Cur-reserve, 1<<20)), rl.Cur
}
