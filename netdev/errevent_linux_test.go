package netdev

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestUDPReadAfterErrorOnlyEvent: an ICMP error that reaches a socket
// whose send buffer is more than half full wakes the runtime poller with
// EPOLLERR alone, after which Go fails reads that would wait ("not
// pollable") until the socket's next event of another kind. The reads
// still absorb the error, count it, and return the next datagram.
func TestUDPReadAfterErrorOnlyEvent(t *testing.T) {
	skipUnlessRoot(t)
	reads := []struct {
		name  string
		opts  Options
		read  func(c *UDPConn, msgs []Message) (int, error)
		close bool // Close the socket instead of sending it a datagram
	}{
		{"ReadBatch with GRO", Options{}, (*UDPConn).ReadBatch, false},
		{"ReadBatch without GRO", Options{NoGRO: true}, (*UDPConn).ReadBatch, false},
		{"ReadBatchGated", Options{}, func(c *UDPConn, msgs []Message) (int, error) {
			var g Gate
			n, err := c.ReadBatchGated(msgs, &g)
			if n > 0 {
				g.Release()
			}
			return n, err
		}, false},
		{"ReadBatch, then Close", Options{}, (*UDPConn).ReadBatch, true},
	}
	inNewNetns(t, func(run func(args ...string)) {
		// 10.9.9.2 is reached through a qdisc that holds what is sent
		// there: at 8 kbit/s the send buffer stays full for seconds.
		run("ip", "link", "add", "veth0", "type", "veth", "peer", "name", "veth1")
		run("ip", "addr", "add", "10.9.9.1/24", "dev", "veth0")
		run("ip", "link", "set", "veth0", "up")
		run("ip", "link", "set", "veth1", "up")
		run("ip", "neigh", "add", "10.9.9.2", "lladdr", "02:00:00:00:00:02", "dev", "veth0")
		run("tc", "qdisc", "add", "dev", "veth0", "root", "tbf", "rate", "8kbit", "burst", "1600", "limit", "10mb")
		self := netip.MustParseAddr("10.9.9.1")
		// The sockets are opened here, on the thread in the namespace.
		var txs, peers []*UDPConn
		for _, rd := range reads {
			opts := rd.opts
			opts.SendBuffer, opts.NoGSO = 64<<10, true
			tx, err := ListenUDP(netip.AddrPortFrom(self, 0), opts)
			require.NoError(t, err)
			defer tx.Close()
			peer, err := ListenUDP(netip.AddrPortFrom(self, 0), Options{})
			require.NoError(t, err)
			defer peer.Close()
			txs, peers = append(txs, tx), append(peers, peer)
		}
		for i, rd := range reads {
			t.Run(rd.name, func(t *testing.T) {
				tx, peer := txs[i], peers[i]
				outq := func() int {
					var q int
					require.NoError(t, tx.rc.Control(func(fd uintptr) { q, _ = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ) }))
					return q
				}
				// Fill three quarters of the send buffer: more than half
				// (not writable), with room for one more datagram.
				far := []Message{{Buf: make([]byte, 1000), N: 1000, Addr: netip.MustParseAddrPort("10.9.9.2:9")}}
				for outq()*4 <= tx.BufferSizes().Send*3 {
					_, err := tx.WriteBatch(far)
					require.NoError(t, err)
				}
				// A datagram to a closed local port: its ICMP port
				// unreachable comes back at once.
				_, err := tx.WriteBatch([]Message{{Buf: []byte("x"), N: 1, Addr: netip.AddrPortFrom(self, 9)}})
				require.NoError(t, err)
				waitSocketError(t, tx)
				time.Sleep(5 * time.Millisecond) // let the runtime poller take the event
				go func() {
					time.Sleep(5 * time.Millisecond)
					if rd.close {
						tx.Close()
						return
					}
					peer.WriteBatch([]Message{{Buf: []byte("hello"), N: 5, Addr: tx.LocalAddr()}})
				}()
				timer := time.AfterFunc(10*time.Second, func() { tx.Close() })
				defer timer.Stop()
				msgs := newMsgs(4, 100)
				start := time.Now()
				n, err := rd.read(tx, msgs)
				if rd.close {
					require.ErrorIs(t, err, net.ErrClosed)
					require.Zero(t, n)
					require.Less(t, time.Since(start), 5*time.Second, "Close unblocks the read")
					return
				}
				require.NoError(t, err)
				require.Equal(t, 1, n)
				require.Equal(t, "hello", string(msgs[0].Buf[:msgs[0].N]))
				require.Positive(t, tx.Stats().ICMPErrors)
			})
		}
	})
}
