package perftest

import (
	"context"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync/atomic"
)

// Two rxectl processes on one host (a server and a client bound to two
// loopback addresses, say) each run GOMAXPROCS threads, by default as many
// as the host has CPUs: together they ask for twice the CPUs there are,
// and their threads displace each other at every wake-up. With half the
// processors each, a 64 KiB write-bw between two processes on this
// project's 2-CPU machine ran 1.5 times as fast, read-bw and send-bw twice
// as fast, and send-lat's t_avg fell from 18 to 10 µs (docs/performance.md,
// "Two processes on one host: half the processors each"). perftest runs
// one thread per process.

// shareHost is set by ShareHostCPUs.
var shareHost atomic.Bool

// ShareHostCPUs makes each end of a test whose peer runs on this host (its
// exchange connection comes from or goes to an address of this host) use
// half of GOMAXPROCS for the test, unless the GOMAXPROCS environment
// variable sets it. The rxectl command calls it: there a process is one
// end of a test (--loopback, both ends in one process, is left alone).
// Tests that run both ends in one process do not.
func ShareHostCPUs() { shareHost.Store(true) }

// sharedProcs returns the GOMAXPROCS for an end whose peer's exchange
// address is peer when the process runs procs, or 0 to leave it: half of
// procs (at least 1) if peer is an address of this host (local reports
// that) and GOMAXPROCS is not set in the environment (envSet).
func sharedProcs(peer netip.Addr, procs int, envSet bool, local func(netip.Addr) bool) int {
	if envSet || procs < 2 || !peer.IsValid() || !local(peer.Unmap()) {
		return 0
	}
	return procs / 2
}

// tcpIP returns the IP address of one end of a TCP connection (its
// LocalAddr or RemoteAddr), or the zero Addr for another kind of address.
func tcpIP(a net.Addr) netip.Addr {
	var ip netip.Addr
	if ta, ok := a.(*net.TCPAddr); ok {
		ip, _ = netip.AddrFromSlice(ta.IP)
	}
	return ip
}

// hostPeer returns the address of host (an IP address or a name), or the
// zero Addr if it does not resolve.
func hostPeer(ctx context.Context, host string) netip.Addr {
	if ips := hostAddrs(ctx, host); len(ips) > 0 {
		return ips[0]
	}
	return netip.Addr{}
}

// hostAddrs returns the addresses of host: host itself if it is an IP
// address, else what the resolver gives for the name (nil if nothing).
func hostAddrs(ctx context.Context, host string) []netip.Addr {
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{ip}
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil
	}
	return ips
}

// onThisHost reports whether ip is a loopback address or an address of one
// of this host's interfaces (in this network namespace).
func onThisHost(ip netip.Addr) bool {
	if ip.IsLoopback() {
		return true
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if x, ok := netip.AddrFromSlice(n.IP); ok && x.Unmap() == ip {
				return true
			}
		}
	}
	return false
}

// shareCPUs applies ShareHostCPUs for a session whose peer has the
// address peer: it lowers GOMAXPROCS to sharedProcs' value and returns the
// function that restores it (a no-op if nothing changed). The session
// records the processors it ran with (s.procs) for the header and --json.
// It runs before the device opens (a socket per processor), except in an
// rdma_cm server, which learns its peer on the device.
func (s *session) shareCPUs(peer netip.Addr) (restore func()) {
	s.procs = runtime.GOMAXPROCS(0)
	if !shareHost.Load() || s.o.loopback {
		return func() {}
	}
	_, envSet := os.LookupEnv("GOMAXPROCS")
	n := sharedProcs(peer, s.procs, envSet, onThisHost)
	if n == 0 {
		return func() {}
	}
	old := runtime.GOMAXPROCS(n)
	s.procs, s.procsWas = n, old
	return func() { runtime.GOMAXPROCS(old) }
}
