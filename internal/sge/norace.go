//go:build !race

package sge

// raceEnabled: built with -race (race.go).
const raceEnabled = false
