package pcapdump_test

import (
	"bytes"
	"testing"
	"time"

	gplayers "github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/netdev/pcapdump"
	rocelayers "github.com/gorxe/gorxe/packet/layers"
)

// ttlConn is a netdev.Conn that reports the TTL ttl of every datagram it
// reads, as a UDPConn does after ReportIPFields.
type ttlConn struct {
	netdev.Conn
	ttl uint8
}

func (c ttlConn) ReadBatch(msgs []netdev.Message) (int, error) {
	n, err := c.Conn.ReadBatch(msgs)
	for i := range msgs[:n] {
		msgs[i].TTL = c.ttl
	}
	return n, err
}

// TestReceivedIPFields: a received datagram whose traffic class and TTL
// the inner Conn reported (netdev.Message.TOS, TTL) is written with them,
// one whose fields were not reported with traffic class 0 and TTL 64, and
// the IPv4 header checksum and the ICRC still check.
func TestReceivedIPFields(t *testing.T) {
	for _, fam := range families {
		t.Run(fam.name, func(t *testing.T) {
			tests := []struct {
				name     string
				tos, ttl uint8 // as reported by the inner Conn (0: not reported)
				wantTTL  uint8
			}{
				{"reported", 0x2a, 200, 200},
				{"tos only", 0x01, 0, 64},
				{"none", 0, 0, 64},
			}
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) {
					a, b := netdev.NewPipeWith(fam.pipe)
					defer b.Close()
					var buf bytes.Buffer
					pa, err := pcapdump.Wrap(ttlConn{a, tc.ttl}, &buf, pcapdump.Options{})
					require.NoError(t, err)
					q := build(t, b.LocalAddr(), a.LocalAddr(), 2, kernelKind)
					_, err = b.WriteBatch([]netdev.Message{{Buf: q, N: len(q), Addr: a.LocalAddr(), TOS: tc.tos}})
					require.NoError(t, err)
					n, err := pa.ReadBatch([]netdev.Message{{Buf: make([]byte, 9000)}})
					require.NoError(t, err)
					require.Equal(t, 1, n)
					require.NoError(t, pa.Close())

					r, err := pcapgo.NewReader(bytes.NewReader(buf.Bytes()))
					require.NoError(t, err)
					frame, _, err := r.ReadPacketData()
					require.NoError(t, err)
					d, err := rocelayers.Datagram(frame, gplayers.LinkTypeEthernet)
					require.NoError(t, err)
					h := d.IPHeader
					tos, ttl := h[1], h[8]
					if h[0]>>4 == 6 {
						tos, ttl = h[0]<<4|h[1]>>4, h[7]
					} else {
						require.Equal(t, uint16(0xFFFF), onesSum(h), "IPv4 header checksum")
					}
					require.Equal(t, tc.tos, tos, "traffic class")
					require.Equal(t, tc.wantTTL, ttl, "TTL")
					require.Equal(t, uint16(0xFFFF), udpSum(d), "UDP checksum")
					require.True(t, d.ICRCOK(), "ICRC")
					require.Zero(t, pa.Stats().BadICRC)
				})
			}
		})
	}
}

// TestHeldReadIPFields: a read that returns while a write is in progress,
// and is recorded after it (held), keeps the traffic class and TTL the
// inner Conn reported.
func TestHeldReadIPFields(t *testing.T) {
	a, b := netdev.NewPipeWith(netdev.PipeOptions{Depth: 1, BlockWhenFull: true})
	defer b.Close()
	var buf bytes.Buffer
	pa, err := pcapdump.Wrap(ttlConn{a, 200}, &buf, pcapdump.Options{})
	require.NoError(t, err)
	defer pa.Close()
	q := build(t, b.LocalAddr(), a.LocalAddr(), 9, gorxeKind)
	_, err = b.WriteBatch([]netdev.Message{{Buf: q, N: len(q), Addr: a.LocalAddr(), TOS: 0x2a}})
	require.NoError(t, err)

	// pa's write of two datagrams waits for b to take the first.
	done := make(chan error, 1)
	go func() {
		msgs := make([]netdev.Message, 2)
		for i := range msgs {
			p := build(t, a.LocalAddr(), b.LocalAddr(), i, gorxeKind)
			msgs[i] = netdev.Message{Buf: p, N: len(p), Addr: b.LocalAddr()}
		}
		_, err := pa.WriteBatch(msgs)
		done <- err
	}()
	waitFor(t, "a sent its first datagram", func() bool { return a.Stats().PacketsSent == 1 })
	n, err := pa.ReadBatch([]netdev.Message{{Buf: make([]byte, 512)}})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	for range 2 {
		_, err := b.ReadBatch([]netdev.Message{{Buf: make([]byte, 512)}})
		require.NoError(t, err)
	}
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the write did not finish")
	}
	require.NoError(t, pa.Close())

	recs := decode4or6(t, buf.Bytes())
	require.Len(t, recs, 3)
	h := recs[2] // the held read, recorded after the write's two
	require.Equal(t, byte(0x2a), h[1], "traffic class")
	require.Equal(t, byte(200), h[8], "TTL")
}

// decode4or6 returns the IP header of every record of a pcap.
func decode4or6(t *testing.T, b []byte) [][]byte {
	t.Helper()
	r, err := pcapgo.NewReader(bytes.NewReader(b))
	require.NoError(t, err)
	var out [][]byte
	for {
		frame, _, err := r.ReadPacketData()
		if err != nil {
			break
		}
		d, err := rocelayers.Datagram(frame, gplayers.LinkTypeEthernet)
		require.NoError(t, err)
		out = append(out, d.IPHeader)
	}
	return out
}
