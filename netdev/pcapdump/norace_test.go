//go:build !race

package pcapdump_test

// raceEnabled reports whether the race detector is on; allocation counts
// are not meaningful under it.
const raceEnabled = false
