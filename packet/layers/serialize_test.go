package layers

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/google/gopacket"
	gplayers "github.com/google/gopacket/layers"
	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/packet"
)

// TestSerializeRoundTrip: gopacket.SerializeLayers(Ethernet, IP, UDP, BTH,
// extension headers, Payload) and FixICRC give exactly the bytes of
// packet.Build over the same pseudo-header, for every opcode and pad, over
// IPv4 (ID 0, DF) and IPv6, with and without UDP checksums.
func TestSerializeRoundTrip(t *testing.T) {
	for _, ph := range []*packet.PseudoHeader{&ph4, &ph6} {
		for _, extra := range []int{0, 1000} {
			for _, s := range samples(extra) {
				t.Run(fmt.Sprintf("%v/%d/%s", ph.Is4(), extra, s.name), func(t *testing.T) {
					want := make([]byte, 2048)
					n, err := packet.Build(want, &s.h, s.payload, ph)
					require.NoError(t, err)
					want = want[:n]
					for _, csum := range []bool{false, true} {
						frame := buildFrame(t, ph, &s.h, s.payload, csum)
						require.Equal(t, want, frame[headerLen(ph):])
						require.NoError(t, CheckICRC(frame, gplayers.LinkTypeEthernet))
						d, err := Datagram(frame, gplayers.LinkTypeEthernet)
						require.NoError(t, err)
						require.True(t, d.ICRCOK())
						require.Equal(t, ph.Src, d.Pseudo.Src)
						if !csum {
							require.Zero(t, d.Checksum)
							continue
						}
						// FixICRC recomputed the UDP checksum the ICRC changed: it is
						// what gopacket computes when the ICRC is already right.
						ls := append(encap(ph), roceLayers(&s.h, s.payload)...)
						ls[3].(*BTH).ICRC = binary.LittleEndian.Uint32(want[n-4:])
						buf := gopacket.NewSerializeBuffer()
						require.NoError(t, gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...))
						require.Equal(t, buf.Bytes(), frame)
						require.NotZero(t, d.Checksum)
					}
				})
			}
		}
	}
}

// TestSerializeDirtyBuffer: PrependBytes and AppendBytes do not zero, so
// every byte of every layer must be written. Serializing into a buffer
// full of garbage gives the same bytes as into a new one.
func TestSerializeDirtyBuffer(t *testing.T) {
	buf := gopacket.NewSerializeBuffer()
	for _, s := range samples(3) {
		want := make([]byte, 512)
		n, err := packet.Build(want, &s.h, s.payload, nil)
		require.NoError(t, err)
		for _, fix := range []bool{true, false} {
			ls := roceLayers(&s.h, s.payload)
			if !fix {
				ls[0].(*BTH).PadCnt = uint8(packet.PadLen(len(s.payload)))
			}
			require.NoError(t, buf.Clear())
			b, err := buf.PrependBytes(600)
			require.NoError(t, err)
			fill(b)
			b, err = buf.AppendBytes(2000)
			require.NoError(t, err)
			fill(b)
			require.NoError(t, gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: fix}, ls...))
			require.Equal(t, want[:n], buf.Bytes(), "%s fix %v", s.name, fix)
		}
	}
}

func fill(b []byte) {
	for i := range b {
		b[i] = 0xA5 ^ byte(i)
	}
}

// TestSerializeDecoded: the layers gopacket decodes (with ours) serialize
// back to the frame they came from, for the scapy fixture (whose reserved
// bits are zero, like ours) and for the samples.
func TestSerializeDecoded(t *testing.T) {
	frames := captures(t)["scapy_fixtures.pcap"]
	for _, s := range samples(0) {
		frames = append(frames, buildFrame(t, &ph4, &s.h, s.payload, true), buildFrame(t, &ph6, &s.h, s.payload, true))
	}
	n := 0
	for i, frame := range frames {
		pkt := gopacket.NewPacket(frame, gplayers.LayerTypeEthernet, gopacket.Default)
		if pkt.ErrorLayer() != nil || pkt.Layer(LayerTypeBTH) == nil {
			continue
		}
		n++
		var ls []gopacket.SerializableLayer
		for _, l := range pkt.Layers() {
			ls = append(ls, l.(gopacket.SerializableLayer))
		}
		buf := gopacket.NewSerializeBuffer()
		require.NoError(t, gopacket.SerializeLayers(buf, gopacket.SerializeOptions{}, ls...))
		out := buf.Bytes()
		if len(frame) < 60 { // gopacket pads Ethernet frames to the minimum
			require.Equal(t, make([]byte, 60-len(frame)), out[len(frame):])
			out = out[:len(frame)]
		}
		require.Equal(t, frame, out, "frame %d", i+1)
	}
	require.Equal(t, 69+2*len(samples(0)), n)
}

// TestFixICRCLinkTypes: FixICRC and CheckICRC find the datagram in every
// link type they know, and refuse frames without one.
func TestFixICRCLinkTypes(t *testing.T) {
	s := samples(0)[10]
	for _, ph := range []*packet.PseudoHeader{&ph4, &ph6} {
		eth := buildFrame(t, ph, &s.h, s.payload, true)
		ip := eth[14:]
		vlan := append(append(append([]byte{}, eth[:12]...), 0x81, 0x00, 0x00, 0x07, 0x88, 0xA8, 0x00, 0x08), eth[12:]...)
		null := append([]byte{2, 0, 0, 0}, ip...)
		frames := map[gplayers.LinkType][]byte{
			gplayers.LinkTypeEthernet: vlan, gplayers.LinkTypeLinuxSLL: toSLL(eth), gplayers.LinkTypeRaw: ip,
			gplayers.LinkTypeIPv4: ip, gplayers.LinkTypeIPv6: ip, 12: ip, 14: ip,
			gplayers.LinkTypeNull: null, gplayers.LinkTypeLoop: null,
		}
		for link, f := range frames {
			f = append([]byte(nil), f...)
			require.NoError(t, CheckICRC(f, link), "%v", link)
			f[len(f)-1] ^= 1
			require.ErrorIs(t, CheckICRC(f, link), packet.ErrBadICRC, "%v", link)
			require.NoError(t, FixICRC(f, link), "%v", link)
			require.NoError(t, CheckICRC(f, link), "%v", link)
			require.Equal(t, frames[link], f)
		}
	}
	eth := buildFrame(t, &ph4, &s.h, s.payload, false)
	arp := append([]byte(nil), eth...)
	arp[12], arp[13] = 0x08, 0x06
	require.ErrorIs(t, FixICRC(arp, gplayers.LinkTypeEthernet), ErrNotIP)
	require.ErrorIs(t, FixICRC(eth[:10], gplayers.LinkTypeEthernet), ErrNotIP)
	require.ErrorIs(t, FixICRC(eth[:15], gplayers.LinkTypeLinuxSLL), ErrNotIP)
	require.ErrorIs(t, FixICRC(eth[:3], gplayers.LinkTypeNull), ErrNotIP)
	require.ErrorIs(t, FixICRC(eth, gplayers.LinkTypeFDDI), ErrLinkType)
	require.ErrorIs(t, FixICRC(eth[:30], gplayers.LinkTypeEthernet), packet.ErrBadIPHeader)
	// A UDP payload too short for BTH and ICRC.
	short := buildFrame(t, &ph4, &s.h, s.payload, false)[:42+15]
	binary.BigEndian.PutUint16(short[16:], 20+8+15)
	binary.BigEndian.PutUint16(short[38:], 8+15)
	require.ErrorIs(t, FixICRC(short, gplayers.LinkTypeEthernet), packet.ErrTruncated)
	require.ErrorIs(t, CheckICRC(short, gplayers.LinkTypeEthernet), packet.ErrTruncated)
}
