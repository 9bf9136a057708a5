package rxe

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// allowedCPUs returns the CPUs the process may run on, in order.
func allowedCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("sched_getaffinity: %w", err)
	}
	var cpus []int
	for i := range len(set) * 64 {
		if set.IsSet(i) {
			cpus = append(cpus, i)
		}
	}
	if len(cpus) == 0 {
		return nil, fmt.Errorf("sched_getaffinity: no CPU")
	}
	return cpus, nil
}

// pinThread locks the calling goroutine to its OS thread for good and
// pins that thread to cpu. The goroutine never unlocks: when it exits it
// takes the thread with it, so a pinned thread never returns to the
// runtime's pool.
func pinThread(cpu int) error {
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("sched_setaffinity(CPU %d): %w", cpu, err)
	}
	return nil
}
