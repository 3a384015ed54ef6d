//go:build !linux

package actors

// newKernelTimer: no timer descriptor here; ExactTimers relies on the
// runtime timers.
func newKernelTimer() (kernelTimer, error) { return nil, nil }
