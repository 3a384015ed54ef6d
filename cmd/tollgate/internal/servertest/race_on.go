//go:build race

package servertest

const raceEnabled = true

// Race reports whether the binary under test is built with the race
// detector (whose shadow memory multiplies a process's resident set).
const Race = raceEnabled
