//go:build linux

// Package netns builds a pair of Linux network namespaces joined by a veth
// link, for root-only tests that need traffic on a real link: a capture
// point where the kernel has already segmented GSO buffers, qdiscs, device
// features. It shells out to ip(8) and, for device features, ethtool(8).
package netns

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// Pair is two network namespaces, A and B, with a veth link between them:
// IfA (address AddrA/24) in A and IfB (AddrB/24) in B, both up, and lo up
// in each.
type Pair struct {
	A, B         string // namespace names (ip netns)
	IfA, IfB     string
	AddrA, AddrB netip.Addr
}

// cmdTimeout bounds every command the package runs.
const cmdTimeout = 10 * time.Second

// Check reports why a Pair cannot be made here (not root, a tool missing),
// or nil.
func Check(tools ...string) error {
	if os.Geteuid() != 0 {
		return errors.New("needs root (network namespaces); CI runs as root")
	}
	for _, tool := range append([]string{"ip"}, tools...) {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("needs %s: %w", tool, err)
		}
	}
	return nil
}

// NewPair creates the namespaces <prefix>-a and <prefix>-b (removing
// leftovers of the same names first) and the link, with addresses
// 10.<net>.0.1 and 10.<net>.0.2. Close removes them.
func NewPair(prefix string, net byte) (*Pair, error) {
	p := &Pair{A: prefix + "-a", B: prefix + "-b", IfA: "veth-a", IfB: "veth-b",
		AddrA: netip.AddrFrom4([4]byte{10, net, 0, 1}), AddrB: netip.AddrFrom4([4]byte{10, net, 0, 2})}
	p.Close()
	steps := [][]string{
		{"ip", "netns", "add", p.A},
		{"ip", "netns", "add", p.B},
		{"ip", "-n", p.A, "link", "add", p.IfA, "type", "veth", "peer", "name", p.IfB, "netns", p.B},
		{"ip", "-n", p.A, "addr", "add", p.AddrA.String() + "/24", "dev", p.IfA},
		{"ip", "-n", p.B, "addr", "add", p.AddrB.String() + "/24", "dev", p.IfB},
		{"ip", "-n", p.A, "link", "set", p.IfA, "up"},
		{"ip", "-n", p.B, "link", "set", p.IfB, "up"},
		{"ip", "-n", p.A, "link", "set", "lo", "up"},
		{"ip", "-n", p.B, "link", "set", "lo", "up"},
	}
	for _, s := range steps {
		if _, err := Command(s...); err != nil {
			p.Close()
			return nil, err
		}
	}
	return p, nil
}

// Close deletes both namespaces (and with them the link).
func (p *Pair) Close() error {
	_, errA := Command("ip", "netns", "del", p.A)
	_, errB := Command("ip", "netns", "del", p.B)
	return errors.Join(errA, errB)
}

// Command runs a command with the package's timeout and returns its
// combined output; the error includes the output.
func Command(args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%v: %w: %s", args, err, out)
	}
	return out, nil
}

// In runs f on an OS thread that has joined namespace ns, and waits for
// it. Sockets f opens belong to ns and may be used from any goroutine
// afterwards. The thread is discarded when f returns.
func In(ns string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		returned := false
		defer func() {
			if !returned {
				errc <- errors.New("netns: f did not return (runtime.Goexit: t.FailNow in f?)")
			}
		}()
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		fd, err := unix.Open("/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			returned = true
			errc <- fmt.Errorf("netns %s: %w", ns, err)
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			returned = true
			errc <- fmt.Errorf("setns %s: %w", ns, err)
			return
		}
		err = f()
		returned = true
		errc <- err
	}()
	return <-errc
}

// Start starts a command inside namespace ns (ip netns exec) and returns it
// running; the caller stops it and waits.
func Start(ns string, args ...string) (*exec.Cmd, error) {
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns}, args...)...)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%v: %w", args, err)
	}
	return cmd, nil
}
