package perftest

import (
	"fmt"

	"github.com/gorxe/gorxe/rxe"
)

// recoveryFlag is --recovery: on, fixed-window or off.
type recoveryFlag uint8

const (
	recoveryOn recoveryFlag = iota
	recoveryFixedWindow
	recoveryOff
)

var recoveryNames = [...]string{"on", "fixed-window", "off"}

func (f *recoveryFlag) String() string { return recoveryNames[*f] }

func (f *recoveryFlag) Set(v string) error {
	for i, n := range recoveryNames {
		if v == n {
			*f = recoveryFlag(i)
			return nil
		}
	}
	return fmt.Errorf("%q: want on, fixed-window or off", v)
}

// config is the devices' rxe.RecoveryConfig for the flag.
func (f recoveryFlag) config() rxe.RecoveryConfig {
	switch f {
	case recoveryFixedWindow:
		return rxe.RecoveryConfig{FixedWindow: true}
	case recoveryOff:
		return rxe.RecoveryConfig{Off: true, FixedWindow: true}
	}
	return rxe.RecoveryConfig{}
}
