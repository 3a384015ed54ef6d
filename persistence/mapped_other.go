//go:build !linux

package persistence

// residentTables is only implemented on Linux: elsewhere it reports none.
func residentTables(string) (int64, []mappedSpan, error) { return 0, nil, nil }

// pageOut is only implemented on Linux.
func pageOut([]mappedSpan) int { return 0 }
