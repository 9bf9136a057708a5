//go:build !linux

package rxe

import (
	"errors"
	"fmt"
)

// allowedCPUs is not implemented outside Linux: PinVectors fails.
func allowedCPUs() ([]int, error) {
	return nil, fmt.Errorf("pinning threads to CPUs: %w", errors.ErrUnsupported)
}

// pinThread is never called outside Linux (allowedCPUs fails first).
func pinThread(int) error { return errors.ErrUnsupported }
