//go:build !race

package packet

// raceEnabled: built with -race (race.go).
const raceEnabled = false
