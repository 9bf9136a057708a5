package perftest

import (
	"net"
	"net/netip"
	"os"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSharedProcs: an end whose peer is on this host takes half the
// processors (at least one), unless GOMAXPROCS is set in the environment
// or there is one processor only; a peer elsewhere changes nothing.
func TestSharedProcs(t *testing.T) {
	local := func(a netip.Addr) bool { return a.IsLoopback() || a == netip.MustParseAddr("10.1.2.3") }
	for _, tc := range []struct {
		name   string
		peer   netip.Addr
		procs  int
		envSet bool
		want   int
	}{
		{"loopback", netip.MustParseAddr("127.0.0.1"), 2, false, 1},
		{"another loopback address", netip.MustParseAddr("127.0.0.2"), 8, false, 4},
		{"IPv4-mapped", netip.MustParseAddr("::ffff:127.0.0.1"), 2, false, 1},
		{"IPv6 loopback", netip.IPv6Loopback(), 3, false, 1},
		{"an interface address", netip.MustParseAddr("10.1.2.3"), 4, false, 2},
		{"another host", netip.MustParseAddr("192.0.2.1"), 2, false, 0},
		{"GOMAXPROCS set", netip.MustParseAddr("127.0.0.1"), 2, true, 0},
		{"one processor", netip.MustParseAddr("127.0.0.1"), 1, false, 0},
		{"no address", netip.Addr{}, 2, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, sharedProcs(tc.peer, tc.procs, tc.envSet, local))
		})
	}
}

// TestOnThisHost: loopback addresses and this host's interface addresses
// are on this host; a documentation address is not.
func TestOnThisHost(t *testing.T) {
	require.True(t, onThisHost(netip.MustParseAddr("127.0.0.1")))
	require.True(t, onThisHost(netip.MustParseAddr("127.0.0.2")))
	require.True(t, onThisHost(netip.IPv6Loopback()))
	require.False(t, onThisHost(netip.MustParseAddr("192.0.2.1")))
	addrs, err := net.InterfaceAddrs()
	require.NoError(t, err)
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() {
			ip, _ := netip.AddrFromSlice(n.IP)
			require.True(t, onThisHost(ip.Unmap()), "%v", ip)
		}
	}
}

// TestShareCPUs: with ShareHostCPUs a session whose peer is on this host
// halves GOMAXPROCS until its restore function runs and records both
// values; without it, or with --loopback, nothing changes.
func TestShareCPUs(t *testing.T) {
	if _, set := os.LookupEnv("GOMAXPROCS"); set {
		t.Skip("GOMAXPROCS is set in the environment: shareCPUs leaves it")
	}
	procs := runtime.GOMAXPROCS(0)
	if procs < 2 {
		t.Skip("one processor: nothing to halve")
	}
	peer := netip.MustParseAddr("127.0.0.1")
	t.Cleanup(func() { shareHost.Store(false); runtime.GOMAXPROCS(procs) })

	s := &session{o: &options{}}
	s.shareCPUs(peer)()
	require.Equal(t, procs, runtime.GOMAXPROCS(0), "without ShareHostCPUs")
	require.Equal(t, procs, s.procs)
	require.Zero(t, s.procsWas)

	ShareHostCPUs()
	s = &session{o: &options{loopback: true}}
	s.shareCPUs(peer)()
	require.Equal(t, procs, runtime.GOMAXPROCS(0), "--loopback")

	s = &session{o: &options{}}
	restore := s.shareCPUs(peer)
	require.Equal(t, procs/2, runtime.GOMAXPROCS(0))
	require.Equal(t, procs/2, s.procs)
	require.Equal(t, procs, s.procsWas)
	restore()
	require.Equal(t, procs, runtime.GOMAXPROCS(0))

	s = &session{o: &options{}}
	s.shareCPUs(netip.MustParseAddr("192.0.2.1"))()
	require.Zero(t, s.procsWas, "a peer on another host")
}
