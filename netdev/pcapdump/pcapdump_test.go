package pcapdump_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/google/gopacket"
	gplayers "github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/netdev/pcapdump"
	"github.com/gorxe/gorxe/packet"
	rocelayers "github.com/gorxe/gorxe/packet/layers"
)

// kind is how a test datagram's ICRC was computed.
type kind struct {
	id      uint16
	flags   uint16
	corrupt bool
}

var (
	gorxeKind   = kind{0, packet.IPv4FlagDF, false}      // what a gorxe socket sends
	kernelKind  = kind{0x1234, packet.IPv4FlagDF, false} // kernel rxe: a non-zero ID
	noDFKind    = kind{0xBEEF, 0, false}                 // a non-zero ID without DF
	corruptKind = kind{0, packet.IPv4FlagDF, true}       // ICRC matches no header
)

// build makes a RoCE packet with PSN psn from src to dst whose ICRC was
// computed with k's IPv4 ID and flags.
func build(t testing.TB, src, dst netip.AddrPort, psn int, k kind) []byte {
	t.Helper()
	ph := packet.PseudoHeader{Src: src.Addr(), Dst: dst.Addr(), SrcPort: src.Port(), DstPort: dst.Port()}
	if ph.Is4() {
		ph.IPID, ph.IPFlags = k.id, k.flags
	}
	ops := []packet.Opcode{packet.RCSendOnly, packet.RCRDMAWriteMiddle, packet.RCAcknowledge, packet.RCRDMAReadResponseLast}
	op := ops[psn%len(ops)]
	h := packet.Headers{BTH: packet.BTHFields{Opcode: op, PKey: packet.DefaultPKey, DestQP: 0x33, PSN: packet.PSN(psn)}}
	var payload []byte
	if op.Info().Is(packet.MaskPayload) {
		payload = bytes.Repeat([]byte{byte(psn)}, 1+psn%61)
	}
	buf := make([]byte, 512)
	n, err := packet.Build(buf, &h, payload, &ph)
	require.NoError(t, err)
	if k.corrupt {
		buf[n-6] ^= 0x10
	}
	return buf[:n]
}

// record is one decoded pcap record.
type record struct {
	sent bool // from LocalMAC
	d    packet.IPDatagram
	psn  int
	at   time.Time // the record's timestamp
}

// decode reads a whole pcap and checks what every record must satisfy:
// Ethernet with our MACs, a correct IPv4 header checksum, TTL 64, a
// correct UDP checksum, and a RoCE datagram that gopacket decodes.
func decode(t *testing.T, b []byte) []record {
	t.Helper()
	r, err := pcapgo.NewReader(bytes.NewReader(b))
	require.NoError(t, err)
	require.Equal(t, gplayers.LinkTypeEthernet, r.LinkType())
	var out []record
	for {
		frame, ci, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		require.Equal(t, ci.CaptureLength, ci.Length)
		var src, dst [6]byte
		copy(dst[:], frame[0:6])
		copy(src[:], frame[6:12])
		sent := src == pcapdump.LocalMAC
		require.True(t, sent && dst == pcapdump.PeerMAC || !sent && src == pcapdump.PeerMAC && dst == pcapdump.LocalMAC)

		d, err := rocelayers.Datagram(frame, gplayers.LinkTypeEthernet)
		require.NoError(t, err)
		if d.IPHeader[0]>>4 == 4 {
			require.Equal(t, uint16(0xFFFF), onesSum(d.IPHeader), "IPv4 header checksum")
			require.Equal(t, byte(64), d.IPHeader[8], "TTL")
		} else {
			require.Equal(t, byte(64), d.IPHeader[7], "hop limit")
		}
		require.NotZero(t, d.Checksum)
		require.Equal(t, uint16(0xFFFF), udpSum(d), "UDP checksum")

		p := gopacket.NewPacket(frame, gplayers.LayerTypeEthernet, gopacket.Default)
		require.Nil(t, p.ErrorLayer(), "gopacket decodes it")
		bth, ok := p.Layer(rocelayers.LayerTypeBTH).(*rocelayers.BTH)
		require.True(t, ok, "a BTH")
		out = append(out, record{sent: sent, d: d, psn: int(bth.Packet().PSN()), at: ci.Timestamp})
	}
	return out
}

func onesSum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s > 0xFFFF {
		s = s&0xFFFF + s>>16
	}
	return uint16(s)
}

// udpSum is the one's complement sum over the UDP pseudo-header, header
// and payload: 0xFFFF when the checksum is right.
func udpSum(d packet.IPDatagram) uint16 {
	var pseudo []byte
	if d.IPHeader[0]>>4 == 4 {
		pseudo = append(pseudo, d.IPHeader[12:20]...)
	} else {
		pseudo = append(pseudo, d.IPHeader[8:40]...)
	}
	l := packet.UDPHeaderSize + len(d.Payload)
	pseudo = append(pseudo, 0, 17, byte(l>>8), byte(l))
	all := append(append(append([]byte(nil), pseudo...), d.UDPHeader...), d.Payload...)
	return onesSum(all)
}

// exchange sends toB from a to b and toA from b to a, concurrently and in
// batches, reads everything on both sides, and closes them.
func exchange(t *testing.T, a, b netdev.Conn, toB, toA [][]byte) {
	t.Helper()
	var wg sync.WaitGroup
	write := func(c netdev.Conn, to netip.AddrPort, pkts [][]byte) {
		defer wg.Done()
		for len(pkts) > 0 {
			k := min(5, len(pkts))
			msgs := make([]netdev.Message, k)
			for i := range msgs {
				msgs[i] = netdev.Message{Buf: pkts[i], N: len(pkts[i]), Addr: to}
			}
			n, err := c.WriteBatch(msgs)
			if err != nil {
				require.ErrorIs(t, err, netdev.ErrLocalDrop)
			}
			pkts = pkts[n:]
		}
	}
	read := func(c netdev.Conn, want int) {
		defer wg.Done()
		msgs := make([]netdev.Message, 8)
		for i := range msgs {
			msgs[i].Buf = make([]byte, 512)
		}
		for got := 0; got < want; {
			n, err := c.ReadBatch(msgs)
			require.NoError(t, err)
			got += n
		}
	}
	wg.Add(4)
	go read(a, len(toA))
	go read(b, len(toB))
	go write(a, b.LocalAddr(), toB)
	go write(b, a.LocalAddr(), toA)
	wg.Wait()
}

// families are the pipes the capture tests run over: IPv4 and IPv6.
var families = []struct {
	name string
	pipe netdev.PipeOptions
}{
	{"ipv4", netdev.PipeOptions{}},
	{"ipv6", netdev.PipeOptions{AddrA: netip.MustParseAddrPort("[fd00::1]:4791"), AddrB: netip.MustParseAddrPort("[fd00::2]:50000")}},
}

// TestCapture wraps both ends of a pipe, exchanges RoCE packets whose ICRCs
// were computed with various IPv4 IDs, and checks both captures.
func TestCapture(t *testing.T) {
	for _, fam := range families {
		t.Run(fam.name, func(t *testing.T) {
			a, b := netdev.NewPipeWith(fam.pipe)
			var bufA, bufB bytes.Buffer
			pa, err := pcapdump.Wrap(a, &bufA, pcapdump.Options{})
			require.NoError(t, err)
			pb, err := pcapdump.Wrap(b, &bufB, pcapdump.Options{})
			require.NoError(t, err)

			// A sends what a gorxe socket sends; B plays a mixed peer.
			const n = 200
			var toB, toA [][]byte
			var kinds []kind
			for i := range n {
				toB = append(toB, build(t, a.LocalAddr(), b.LocalAddr(), i, gorxeKind))
				k := []kind{gorxeKind, kernelKind, noDFKind, gorxeKind}[i%4]
				if i == 77 {
					k = corruptKind
				}
				if fam.name == "ipv6" && !k.corrupt {
					k = gorxeKind
				}
				kinds = append(kinds, k)
				toA = append(toA, build(t, b.LocalAddr(), a.LocalAddr(), i, k))
			}
			exchange(t, pa, pb, toB, toA)
			require.NoError(t, pa.Close())
			require.NoError(t, pb.Close())
			require.NoError(t, pa.Err())
			require.NoError(t, pb.Err())

			recovered := 0
			for _, k := range kinds {
				if k == kernelKind || k == noDFKind {
					recovered++
				}
			}
			require.Equal(t, pcapdump.Stats{Sent: n, Received: n, BadICRC: 1, Recovered: uint64(recovered)}, pa.Stats())
			require.Equal(t, pcapdump.Stats{Sent: n, Received: n}, pb.Stats())

			check := func(recs []record, from, to netip.AddrPort, sent bool, kindOf func(int) kind) {
				t.Helper()
				var order []int
				for _, r := range recs {
					if r.sent != sent {
						continue
					}
					order = append(order, r.psn)
					ph := r.d.Pseudo
					require.Equal(t, from, netip.AddrPortFrom(ph.Src, ph.SrcPort))
					require.Equal(t, to, netip.AddrPortFrom(ph.Dst, ph.DstPort))
					k := kindOf(r.psn)
					require.Equal(t, !k.corrupt, r.d.ICRCOK(), "psn %d", r.psn)
					if ph.Is4() {
						if k.corrupt {
							k = gorxeKind
						}
						require.Equal(t, k.id, ph.IPID, "psn %d", r.psn)
						require.Equal(t, k.flags, ph.IPFlags, "psn %d", r.psn)
					}
				}
				want := make([]int, n)
				for i := range want {
					want[i] = i
				}
				require.Equal(t, want, order, "in order")
			}
			all := func(int) kind { return gorxeKind }
			recsA, recsB := decode(t, bufA.Bytes()), decode(t, bufB.Bytes())
			require.Len(t, recsA, 2*n)
			require.Len(t, recsB, 2*n)
			check(recsA, a.LocalAddr(), b.LocalAddr(), true, all)
			check(recsB, a.LocalAddr(), b.LocalAddr(), false, all)
			// A recovers each ID B's packets were made with.
			check(recsA, b.LocalAddr(), a.LocalAddr(), false, func(i int) kind { return kinds[i] })
			// B writes its sends as a gorxe socket sends them: those made
			// for another ID do not check (nor would they on the wire).
			check(recsB, b.LocalAddr(), a.LocalAddr(), true, func(i int) kind {
				if kinds[i] != gorxeKind {
					return kind{corrupt: true}
				}
				return gorxeKind
			})
		})
	}
}

// TestOnlySentRecorded checks that datagrams WriteBatch did not send are
// not recorded.
func TestOnlySentRecorded(t *testing.T) {
	a, b := netdev.NewPipeWith(netdev.PipeOptions{Depth: 3})
	defer a.Close()
	var buf bytes.Buffer
	pa, err := pcapdump.Wrap(a, &buf, pcapdump.Options{})
	require.NoError(t, err)
	msgs := make([]netdev.Message, 5)
	for i := range msgs {
		p := build(t, a.LocalAddr(), b.LocalAddr(), i, gorxeKind)
		msgs[i] = netdev.Message{Buf: p, N: len(p), Addr: b.LocalAddr()}
	}
	n, err := pa.WriteBatch(msgs)
	require.ErrorIs(t, err, netdev.ErrLocalDrop)
	require.Equal(t, 3, n)
	require.NoError(t, pa.Flush())
	recs := decode(t, buf.Bytes())
	require.Len(t, recs, 3)
	require.Equal(t, uint64(3), pa.Stats().Sent)
}

// TestAddresses checks where the local address comes from, and that a
// datagram with addresses of two families is skipped.
func TestAddresses(t *testing.T) {
	a, b := netdev.NewPipe()
	defer a.Close()
	var buf bytes.Buffer
	override := netip.MustParseAddr("10.0.0.1")
	pa, err := pcapdump.Wrap(a, &buf, pcapdump.Options{LocalAddr: override})
	require.NoError(t, err)
	p := build(t, a.LocalAddr(), b.LocalAddr(), 1, gorxeKind)
	explicit := netip.MustParseAddr("10.0.0.9")
	msgs := []netdev.Message{
		{Buf: p, N: len(p), Addr: b.LocalAddr()},
		{Buf: p, N: len(p), Addr: b.LocalAddr(), Local: explicit},
		{Buf: p, N: len(p), Addr: netip.MustParseAddrPort("[fd00::2]:4791")}, // unroutable, and the wrong family
	}
	n, err := pa.WriteBatch(msgs)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	require.NoError(t, pa.Close())
	recs := decode(t, buf.Bytes())
	require.Len(t, recs, 2)
	require.Equal(t, override, recs[0].d.Pseudo.Src)
	require.Equal(t, explicit, recs[1].d.Pseudo.Src)
	require.Equal(t, uint64(1), pa.Stats().Skipped)
}

// failWriter fails every write after the first ok bytes.
type failWriter struct {
	ok  int
	buf bytes.Buffer
}

var errDisk = errors.New("disk full")

func (w *failWriter) Write(p []byte) (int, error) {
	if w.buf.Len()+len(p) > w.ok {
		return 0, errDisk
	}
	return w.buf.Write(p)
}

// TestWriteError checks that a failing writer stops the capture but not
// the traffic.
func TestWriteError(t *testing.T) {
	x, _ := netdev.NewPipe()
	defer x.Close()
	_, err := pcapdump.Wrap(x, &failWriter{}, pcapdump.Options{})
	require.ErrorIs(t, err, errDisk)

	a, b := netdev.NewPipe()
	w := &failWriter{ok: 24 + 1000} // room for the first batch of 5, not the second
	pa, err := pcapdump.Wrap(a, w, pcapdump.Options{FlushEachBatch: true})
	require.NoError(t, err)
	var toB [][]byte
	for i := range 20 {
		toB = append(toB, build(t, a.LocalAddr(), b.LocalAddr(), i, gorxeKind))
	}
	exchange(t, pa, b, toB, nil)
	require.ErrorIs(t, pa.Err(), errDisk)
	require.ErrorIs(t, pa.Flush(), errDisk)
	require.NoError(t, pa.Close(), "Close reports the inner Conn's error only")
	st := pa.Stats()
	require.Equal(t, uint64(1), st.WriteErrors)
	require.Equal(t, uint64(20), st.Sent+st.Skipped)
	require.Less(t, st.Sent, uint64(20))
	// What was written before the error is a valid capture.
	r, err := pcapgo.NewReader(bytes.NewReader(w.buf.Bytes()))
	require.NoError(t, err)
	_, _, err = r.ReadPacketData()
	require.NoError(t, err)
}

// TestBuffering checks that records are buffered until Flush or Close,
// unless FlushEachBatch is set.
func TestBuffering(t *testing.T) {
	for _, each := range []bool{false, true} {
		a, b := netdev.NewPipe()
		var buf bytes.Buffer
		pa, err := pcapdump.Wrap(a, &buf, pcapdump.Options{FlushEachBatch: each})
		require.NoError(t, err)
		require.Equal(t, 24, buf.Len(), "the file header is written at once")
		p := build(t, a.LocalAddr(), b.LocalAddr(), 0, gorxeKind)
		_, err = pa.WriteBatch([]netdev.Message{{Buf: p, N: len(p), Addr: b.LocalAddr()}})
		require.NoError(t, err)
		frameLen := 16 + 14 + 20 + 8 + len(p)
		if each {
			require.Equal(t, 24+frameLen, buf.Len())
		} else {
			require.Equal(t, 24, buf.Len())
			require.NoError(t, pa.Flush())
			require.Equal(t, 24+frameLen, buf.Len())
		}
		require.NoError(t, pa.Close())
		require.NoError(t, pa.Close(), "closing twice")
		_, err = pa.WriteBatch([]netdev.Message{{Buf: p, N: len(p), Addr: b.LocalAddr()}})
		require.Error(t, err)
		require.Equal(t, 24+frameLen, buf.Len(), "nothing recorded after Close")
	}
}

// TestAllocs checks that recording allocates nothing per batch.
func TestAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	a, b := netdev.NewPipe()
	defer a.Close()
	pa, err := pcapdump.Wrap(a, io.Discard, pcapdump.Options{})
	require.NoError(t, err)
	pb, err := pcapdump.Wrap(b, io.Discard, pcapdump.Options{})
	require.NoError(t, err)
	out := make([]netdev.Message, 16)
	in := make([]netdev.Message, 16)
	for i := range out {
		p := build(t, a.LocalAddr(), b.LocalAddr(), i, []kind{gorxeKind, kernelKind}[i%2])
		out[i] = netdev.Message{Buf: p, N: len(p), Addr: b.LocalAddr()}
		in[i].Buf = make([]byte, 512)
	}
	step := func() {
		if _, err := pa.WriteBatch(out); err != nil {
			t.Fatal(err)
		}
		for got := 0; got < len(out); {
			n, err := pb.ReadBatch(in)
			if err != nil {
				t.Fatal(err)
			}
			got += n
		}
	}
	step() // warm the ID recovery caches
	require.Zero(t, testing.AllocsPerRun(50, step))
}

// TestSentTOS: the packets sent are written with their Message.TOS, or
// Options.SentTOS where that is 0, as their IP traffic class, those
// received with 0, in IPv4 and IPv6 headers, and
// every header stays valid (decode checks the IPv4 checksum).
func TestSentTOS(t *testing.T) {
	for _, fam := range families {
		t.Run(fam.name, func(t *testing.T) {
			a, b := netdev.NewPipeWith(fam.pipe)
			defer a.Close()
			defer b.Close()
			var buf bytes.Buffer
			pa, err := pcapdump.Wrap(a, &buf, pcapdump.Options{SentTOS: 0xb9})
			require.NoError(t, err)
			p := build(t, a.LocalAddr(), b.LocalAddr(), 1, gorxeKind)
			p3 := build(t, a.LocalAddr(), b.LocalAddr(), 3, gorxeKind)
			// The second one carries a class of its own (Message.TOS).
			_, err = pa.WriteBatch([]netdev.Message{{Buf: p, N: len(p), Addr: b.LocalAddr()}, {Buf: p3, N: len(p3), Addr: b.LocalAddr(), TOS: 0x28}})
			require.NoError(t, err)
			q := build(t, b.LocalAddr(), a.LocalAddr(), 2, gorxeKind)
			_, err = b.WriteBatch([]netdev.Message{{Buf: q, N: len(q), Addr: a.LocalAddr()}})
			require.NoError(t, err)
			_, err = pa.ReadBatch([]netdev.Message{{Buf: make([]byte, 9000)}})
			require.NoError(t, err)
			require.NoError(t, pa.Close())
			recs := decode(t, buf.Bytes())
			require.Len(t, recs, 3)
			for _, r := range recs {
				h := r.d.IPHeader
				tos := h[1]
				if h[0]>>4 == 6 {
					tos = h[0]<<4 | h[1]>>4
					require.Equal(t, byte(0), h[1]&0x0F|h[2]|h[3], "flow label 0")
				}
				want := byte(0)
				switch {
				case r.sent && r.psn == 3:
					want = 0x28
				case r.sent:
					want = 0xb9
				}
				require.Equal(t, want, tos, "sent %v", r.sent)
			}
		})
	}
}
