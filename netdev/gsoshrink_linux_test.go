package netdev

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestGSOShrinksOnLocalDrop puts a tbf qdisc whose queue (32 KiB) is smaller
// than a full GSO buffer (15 datagrams of 4128 bytes, 62 KiB) on lo, as
// docs/seed002.md's bench puts on its veth: the qdisc drops such a buffer
// whole, however empty its queue, and the sender sees ENOBUFS. A sender
// that retries the refused datagrams after each drop, as rxe's local-drop
// back-off does, must get them all out: each refusal of a buffer of
// several datagrams halves the bytes a GSO buffer may carry
// (Stats.GSOShrinks), down to single datagrams if need be.
func TestGSOShrinksOnLocalDrop(t *testing.T) {
	skipUnlessRoot(t)
	for _, fam := range []struct {
		name string
		addr netip.Addr
		opts Options
	}{
		{"IPv4", lo4, Options{RewriteIPv4ID: func([]byte, uint16, uint16) {}}},
		{"IPv6", netip.IPv6Loopback(), Options{}},
	} {
		t.Run(fam.name, func(t *testing.T) {
			inNewNetns(t, func(run func(args ...string)) {
				run("tc", "qdisc", "add", "dev", "lo", "root", "tbf", "rate", "1gbit", "burst", "64kb", "limit", "32kb")
				rx, err := ListenUDP(netip.AddrPortFrom(fam.addr, 0), Options{})
				require.NoError(t, err)
				defer rx.Close()
				tx, err := ListenUDP(netip.AddrPortFrom(fam.addr, 0), fam.opts)
				require.NoError(t, err)
				defer tx.Close()
				if !tx.gso.Load() {
					t.Skip("the kernel does not take UDP_SEGMENT")
				}
				const n, size = 15, 4128
				msgs := make([]Message, n)
				for i := range msgs {
					buf := make([]byte, size)
					binary.BigEndian.PutUint32(buf, uint32(i))
					msgs[i] = Message{Buf: buf, N: size, Addr: rx.LocalAddr()}
				}
				sent, drops := 0, 0
				for try := 0; sent < n && try < 100; try++ {
					k, err := tx.WriteBatch(msgs[sent:])
					sent += k
					if err != nil {
						require.ErrorIs(t, err, ErrLocalDrop)
						drops++
						// The qdisc drains 32 KiB in 0.26 ms at 1 Gbit/s.
						time.Sleep(time.Millisecond)
					}
				}
				st := tx.Stats()
				t.Logf("%d local drops; stats %+v", drops, st)
				require.Equal(t, n, sent, "datagrams sent after %d local drops", drops)
				require.Positive(t, st.GSOShrinks, "a refused GSO buffer shrinks the next ones")
				got := readN(t, rx, n)
				for i, r := range got {
					require.Len(t, r.data, size)
					require.Equal(t, uint32(i), binary.BigEndian.Uint32(r.data), "datagram %d in order", i)
				}
			})
		})
	}
}
