package netdev

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var (
	lo4  = netip.MustParseAddr("127.0.0.1")
	lo6  = netip.MustParseAddr("::1")
	any4 = netip.IPv4Unspecified()
	any6 = netip.IPv6Unspecified()
)

// listen opens a UDPConn closed at the end of the test.
func listen(t testing.TB, addr netip.Addr, opts Options) *UDPConn {
	t.Helper()
	c, err := ListenUDP(netip.AddrPortFrom(addr, 0), opts)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// skipNoIPv6 skips the test if ::1 cannot be bound.
func skipNoIPv6(t testing.TB) {
	t.Helper()
	c, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback})
	if err != nil {
		t.Skipf("IPv6 loopback unavailable: %v", err)
	}
	c.Close()
}

// families are the address families the socket tests run on.
var families = []struct {
	name      string
	lo, any   netip.Addr
	needsIPv6 bool
}{
	{"ipv4", lo4, any4, false},
	{"ipv6", lo6, any6, true},
}

func newMsgs(n, size int) []Message {
	msgs := make([]Message, n)
	for i := range msgs {
		msgs[i].Buf = make([]byte, size)
	}
	return msgs
}

// received is one datagram as read.
type received struct {
	data        []byte
	from        netip.AddrPort
	local       netip.Addr
	batchLength int
	tos, ttl    uint8
}

// readN reads until it has want datagrams. If they do not arrive within
// 10 s it closes c, so the test fails instead of hanging.
func readN(t testing.TB, c Conn, want int) []received {
	t.Helper()
	timer := time.AfterFunc(10*time.Second, func() { c.Close() })
	defer timer.Stop()
	msgs := newMsgs(c.BatchSize(), 9000)
	var out []received
	for len(out) < want {
		n, err := c.ReadBatch(msgs)
		require.NoError(t, err, "after %d of %d datagrams", len(out), want)
		require.Positive(t, n)
		for _, m := range msgs[:n] {
			out = append(out, received{bytes.Clone(m.Buf[:m.N]), m.Addr, m.Local, n, m.TOS, m.TTL})
		}
	}
	return out
}

// payload returns datagram i of a test stream: its index, then a pattern.
func payload(i int) []byte {
	b := make([]byte, 8+(i*37)%1200)
	binary.BigEndian.PutUint64(b, uint64(i))
	for j := 8; j < len(b); j++ {
		b[j] = byte(i + j)
	}
	return b
}
