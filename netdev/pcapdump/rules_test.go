package pcapdump_test

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/netdev/pcapdump"
)

// TestFileHeader: the pcap file header is the nanosecond-resolution one
// (magic 0xa1b23c4d, version 2.4), with Snaplen and link type Ethernet (1).
func TestFileHeader(t *testing.T) {
	a, _ := netdev.NewPipe()
	defer a.Close()
	var buf bytes.Buffer
	_, err := pcapdump.Wrap(a, &buf, pcapdump.Options{})
	require.NoError(t, err)
	h := buf.Bytes()
	require.Len(t, h, 24)
	le := binary.LittleEndian
	require.Equal(t, uint32(0xa1b23c4d), le.Uint32(h[0:]), "nanosecond magic")
	require.Equal(t, uint16(2), le.Uint16(h[4:]))
	require.Equal(t, uint16(4), le.Uint16(h[6:]))
	require.Equal(t, uint32(pcapdump.Snaplen), le.Uint32(h[16:]))
	require.Equal(t, uint32(1), le.Uint32(h[20:]), "LINKTYPE_ETHERNET")
}

// TestRecoveredWithoutDF: a received IPv4 datagram whose ICRC matches
// ID 0 without DF is written so and counted in Recovered (an ID other
// than 0 or no DF), not as gorxe's own ID 0 with DF.
func TestRecoveredWithoutDF(t *testing.T) {
	a, b := netdev.NewPipe()
	defer a.Close()
	var buf bytes.Buffer
	pa, err := pcapdump.Wrap(a, &buf, pcapdump.Options{})
	require.NoError(t, err)
	p := build(t, b.LocalAddr(), a.LocalAddr(), 1, kind{0, 0, false})
	_, err = b.WriteBatch([]netdev.Message{{Buf: p, N: len(p), Addr: a.LocalAddr()}})
	require.NoError(t, err)
	msgs := []netdev.Message{{Buf: make([]byte, 512)}}
	n, err := pa.ReadBatch(msgs)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.NoError(t, pa.Flush())
	require.Equal(t, pcapdump.Stats{Received: 1, Recovered: 1}, pa.Stats())
	recs := decode(t, buf.Bytes())
	require.Len(t, recs, 1)
	require.Zero(t, recs[0].d.Pseudo.IPID)
	require.Zero(t, recs[0].d.Pseudo.IPFlags)
	require.True(t, recs[0].d.ICRCOK())
}

// TestOversizedSkipped: a datagram longer than an IPv4 UDP payload can be
// (65507 bytes; a pipe carries it) has no frame to write: it is skipped,
// not written with a wrapped length.
func TestOversizedSkipped(t *testing.T) {
	a, b := netdev.NewPipe()
	defer a.Close()
	var buf bytes.Buffer
	pa, err := pcapdump.Wrap(a, &buf, pcapdump.Options{})
	require.NoError(t, err)
	big := make([]byte, 70000)
	n, err := pa.WriteBatch([]netdev.Message{{Buf: big, N: len(big), Addr: b.LocalAddr()}})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.NoError(t, pa.Flush())
	require.Equal(t, pcapdump.Stats{Skipped: 1}, pa.Stats())
	require.Len(t, decode(t, buf.Bytes()), 0)
}

// TestLocalAddresses: a v4-mapped Message.Local is the IPv4 address it
// maps, and a Conn made by Share writes Options.LocalAddr as the Conn it
// shares with does, with its own inner Conn's port.
func TestLocalAddresses(t *testing.T) {
	a1, b1 := netdev.NewPipe()
	a2, b2 := netdev.NewPipeWith(netdev.PipeOptions{AddrA: netip.MustParseAddrPort("127.0.0.3:5000"), AddrB: netip.MustParseAddrPort("127.0.0.4:4791")})
	defer a1.Close()
	defer a2.Close()
	var buf bytes.Buffer
	override := netip.MustParseAddr("10.0.0.1")
	p1, err := pcapdump.Wrap(a1, &buf, pcapdump.Options{LocalAddr: override})
	require.NoError(t, err)
	p2 := p1.Share(a2)

	p := build(t, a1.LocalAddr(), b1.LocalAddr(), 1, gorxeKind)
	_, err = p1.WriteBatch([]netdev.Message{{Buf: p, N: len(p), Addr: b1.LocalAddr(), Local: netip.MustParseAddr("::ffff:10.0.0.9")}})
	require.NoError(t, err)
	p = build(t, a2.LocalAddr(), b2.LocalAddr(), 2, gorxeKind)
	_, err = p2.WriteBatch([]netdev.Message{{Buf: p, N: len(p), Addr: b2.LocalAddr()}})
	require.NoError(t, err)
	require.NoError(t, p1.Flush())
	require.Zero(t, p1.Stats().Skipped)
	recs := decode(t, buf.Bytes())
	require.Len(t, recs, 2)
	require.Equal(t, netip.MustParseAddrPort("10.0.0.9:4791"), netip.AddrPortFrom(recs[0].d.Pseudo.Src, recs[0].d.Pseudo.SrcPort))
	require.Equal(t, netip.AddrPortFrom(override, 5000), netip.AddrPortFrom(recs[1].d.Pseudo.Src, recs[1].d.Pseudo.SrcPort))
}

// TestWriteErrorMidBatch: when the io.Writer fails in the middle of a
// batch's records, the datagram whose record failed and those after it
// are counted in Skipped, so Sent + Skipped is every datagram sent.
func TestWriteErrorMidBatch(t *testing.T) {
	a, b := netdev.NewPipe()
	defer a.Close()
	w := &failWriter{ok: 24}
	pa, err := pcapdump.Wrap(a, w, pcapdump.Options{})
	require.NoError(t, err)
	msgs := make([]netdev.Message, 3)
	for i := range msgs {
		// Two records fit the 64 KiB buffer; the third makes it flush.
		msgs[i] = netdev.Message{Buf: make([]byte, 30000), N: 30000, Addr: b.LocalAddr()}
	}
	n, err := pa.WriteBatch(msgs)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	require.ErrorIs(t, pa.Err(), errDisk)
	st := pa.Stats()
	require.Equal(t, uint64(1), st.WriteErrors)
	require.Equal(t, uint64(3), st.Sent+st.Skipped)
}
