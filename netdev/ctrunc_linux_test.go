package netdev

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// shrinkControl gives c's receive headers oob bytes of control buffer each,
// so that the kernel truncates the control data that does not fit and sets
// MSG_CTRUNC, as it never does with recvOOBSize. Call it before reading.
func shrinkControl(c *UDPConn, oob int) {
	c.rx = newRecvMmsg(len(c.rx.hdrs), oob)
}

// keepID is a RewriteIPv4ID for payloads that do not cover the IPv4 ID: it
// lets an IPv4 sender coalesce runs with GSO.
func keepID([]byte, uint16, uint16) {}

// gsoRun is count datagrams of size bytes to to, which a sender with GSO
// sends as one buffer and a receiver with GRO receives as one.
func gsoRun(to netip.AddrPort, count, size int) []Message {
	ms := make([]Message, count)
	for i := range ms {
		ms[i] = Message{Buf: bytes.Repeat([]byte{byte(i)}, size), N: size, Addr: to}
	}
	return ms
}

// readResult is what one read of a test reader returned.
type readResult struct {
	data  [][]byte
	local []netip.Addr
	err   error
}

// ctruncReaders are the three ways to read a UDPConn, each blocking until
// it returns datagrams or an error.
var ctruncReaders = []struct {
	name string
	read func(c *UDPConn, msgs []Message) (int, error)
}{
	{"ReadBatch", func(c *UDPConn, msgs []Message) (int, error) { return c.ReadBatch(msgs) }},
	{"ReadBatchGated", func(c *UDPConn, msgs []Message) (int, error) {
		var g Gate
		n, err := c.ReadBatchGated(msgs, &g)
		if n > 0 {
			g.Release()
		}
		return n, err
	}},
	{"TryReadBatch", func(c *UDPConn, msgs []Message) (int, error) {
		for {
			if n, err := c.TryReadBatch(msgs); n > 0 || err != nil {
				return n, err
			}
			time.Sleep(time.Millisecond)
		}
	}},
}

// TestRecvControlTruncatedDropped makes the kernel truncate the control
// data of received buffers (a control buffer too small for it: MSG_CTRUNC)
// and checks that every read path drops such a buffer and counts it in
// Stats.ControlTruncated instead of returning it. Without the UDP_GRO
// segment size a coalesced buffer of 20 datagrams would be returned as one
// datagram; without IP_PKTINFO a datagram to a wildcard socket would be
// returned with the wildcard as its local address. A later datagram whose
// control data fits is returned as usual.
func TestRecvControlTruncatedDropped(t *testing.T) {
	cases := []struct {
		name     string
		wildcard bool
		noGRO    bool
		oob      int  // control buffer per header
		run      bool // send a GSO run (else one datagram)
		good     bool // a datagram whose control data fits follows
	}{
		// Room for a cmsghdr only: UDP_GRO does not fit.
		{name: "gro-segment", oob: unix.SizeofCmsghdr, run: true, good: true},
		// Room for IPV6_PKTINFO: a single datagram's IP_PKTINFO fits, a
		// coalesced buffer's UDP_GRO and pktinfo do not.
		{name: "gro-wildcard", wildcard: true, oob: unix.CmsgSpace(unix.SizeofInet6Pktinfo), run: true, good: true},
		// No GRO, wildcard: IP_PKTINFO does not fit.
		{name: "pktinfo", wildcard: true, noGRO: true, oob: unix.SizeofCmsghdr},
	}
	for _, fam := range families {
		for _, tc := range cases {
			for _, rd := range ctruncReaders {
				t.Run(fmt.Sprintf("%s/%s/%s", fam.name, tc.name, rd.name), func(t *testing.T) {
					if fam.needsIPv6 {
						skipNoIPv6(t)
					}
					bind := fam.lo
					if tc.wildcard {
						bind = fam.any
					}
					rx := listen(t, bind, Options{NoGRO: tc.noGRO})
					if !tc.noGRO {
						require.True(t, rx.GRO(), "UDP_GRO unavailable")
					}
					shrinkControl(rx, tc.oob)
					tx := listen(t, fam.lo, Options{RewriteIPv4ID: keepID})
					to := netip.AddrPortFrom(fam.lo, rx.LocalAddr().Port())

					got := make(chan readResult, 1)
					go func() {
						msgs := newMsgs(rx.BatchSize(), 100)
						n, err := rd.read(rx, msgs)
						var r readResult
						for _, m := range msgs[:n] {
							r.data = append(r.data, bytes.Clone(m.Buf[:m.N]))
							r.local = append(r.local, m.Local)
						}
						r.err = err
						got <- r
					}()

					bad := []Message{{Buf: []byte("bad"), N: 3, Addr: to}}
					if tc.run {
						bad = gsoRun(to, 20, 1000)
					}
					n, err := tx.WriteBatch(bad)
					require.NoError(t, err)
					require.Equal(t, len(bad), n)
					if tc.run {
						require.Equal(t, uint64(1), tx.Stats().GSOBuffers, "the run went out as one buffer")
					}
					// Wait until the buffer is counted; the reader must not
					// return it meanwhile.
					deadline := time.After(10 * time.Second)
					for rx.Stats().ControlTruncated == 0 {
						select {
						case r := <-got:
							lens := make([]int, len(r.data))
							for i, d := range r.data {
								lens[i] = len(d)
							}
							t.Fatalf("returned datagrams of %v bytes to %v (err %v) from a buffer whose control data was truncated", lens, r.local, r.err)
						case <-deadline:
							t.Fatal("the truncated buffer was not counted")
						case <-time.After(time.Millisecond):
						}
					}

					var r readResult
					if tc.good {
						n, err = tx.WriteBatch([]Message{{Buf: []byte("good"), N: 4, Addr: to}})
						require.NoError(t, err)
						require.Equal(t, 1, n)
					} else {
						rx.Close()
					}
					select {
					case r = <-got:
					case <-time.After(10 * time.Second):
						rx.Close()
						t.Fatal("the reader did not return")
					}
					if tc.good {
						require.NoError(t, r.err)
						require.Equal(t, [][]byte{[]byte("good")}, r.data, "only the datagram whose control data fits")
						require.Equal(t, []netip.Addr{fam.lo}, r.local)
					} else {
						require.ErrorIs(t, r.err, net.ErrClosed, "nothing returned: %q", r.data)
					}
					s := rx.Stats()
					require.Equal(t, uint64(1), s.ControlTruncated)
					require.Zero(t, s.Truncated)
					require.Zero(t, s.GROBuffers)
					require.Equal(t, uint64(len(r.data)), s.PacketsReceived)
				})
			}
		}
	}
}

// TestRecvControlFits receives with every control message a UDPConn asks
// for present at once (IP_PKTINFO or IPV6_PKTINFO on a wildcard socket,
// SO_RXQ_OVFL after drops, UDP_GRO for a coalesced buffer, the traffic
// class and TTL of ReportIPFields): recvOOBSize holds them all, so nothing
// is truncated.
func TestRecvControlFits(t *testing.T) {
	for _, fam := range families {
		t.Run(fam.name, func(t *testing.T) {
			if fam.needsIPv6 {
				skipNoIPv6(t)
			}
			rx := listen(t, fam.any, Options{RecvBuffer: 4096}) // the kernel's minimum
			require.True(t, rx.GRO(), "UDP_GRO unavailable")
			require.NoError(t, rx.ReportIPFields())
			to := netip.AddrPortFrom(fam.lo, rx.LocalAddr().Port())
			flood := listen(t, fam.lo, Options{NoGSO: true})
			_, err := flood.WriteBatch(gsoRun(to, 64, 1000)) // nobody reads: most are dropped
			require.NoError(t, err)
			settle(t, rx, 64) // the flood is all in before the buffer grows
			var serr error
			require.NoError(t, rx.rc.Control(func(fd uintptr) {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 1<<20)
			}))
			require.NoError(t, serr)

			tx := listen(t, fam.lo, Options{RewriteIPv4ID: keepID})
			run := gsoRun(to, 20, 1000)
			_, err = tx.WriteBatch(run)
			require.NoError(t, err)
			got := readN(t, rx, len(run))
			for i, r := range got {
				require.Equal(t, run[i].Buf, r.data, "datagram %d", i)
				require.Equal(t, fam.lo, r.local)
			}
			s := rx.Stats()
			require.Positive(t, s.RecvOverflows)
			require.Equal(t, uint64(1), s.GROBuffers)
			require.Zero(t, s.ControlTruncated)
		})
	}
}
