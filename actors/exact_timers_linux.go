package actors

import (
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// timerFD is a Linux timer file descriptor (timerfd_create(2)) on the
// monotonic clock, read through the runtime's poller: a goroutine blocked
// on it is woken when the kernel's high-resolution timer expires.
type timerFD struct {
	f  *os.File
	rc syscall.RawConn
}

func newKernelTimer() (kernelTimer, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("timerfd_create: %w", err)
	}
	// non-blocking, so os.NewFile registers it with the poller
	f := os.NewFile(uintptr(fd), "exact-timer")
	rc, err := f.SyscallConn()
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("timerfd: %w", err)
	}
	return &timerFD{f: f, rc: rc}, nil
}

func (k *timerFD) set(d time.Duration) error {
	var spec unix.ItimerSpec
	if d > 0 {
		spec.Value = unix.NsecToTimespec(int64(d))
	}
	var serr error
	if err := k.rc.Control(func(fd uintptr) { serr = unix.TimerfdSettime(int(fd), 0, &spec, nil) }); err != nil {
		return fmt.Errorf("timerfd: %w", err)
	}
	if serr != nil {
		return fmt.Errorf("timerfd_settime: %w", serr)
	}
	return nil
}

func (k *timerFD) wait() error {
	var expirations [8]byte
	_, err := k.f.Read(expirations[:])
	return err
}

func (k *timerFD) close() error { return k.f.Close() }
