//go:build race

package packet

// raceEnabled: built with -race. The race detector does not see the loads
// and stores of assembly, so the copies that could run in it use the
// built-in copy, which it instruments.
const raceEnabled = true
