package netdev

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// FuzzControlMessages: the control-message and address parsers take any
// bytes (truncated headers, lengths past the buffer) without panicking or
// reading outside them. And from values the input gives, control messages
// laid out as the kernel lays them out, in an order the input picks and
// with unknown messages carrying the input between them, parse to exactly
// those values (parseRecvCmsgs, errQueueOrigin), and an address written
// by putSockaddr reads back the same (sockaddrAddrPort).
func FuzzControlMessages(f *testing.F) {
	f.Add([]byte{})
	f.Add(cmsgBytes(17, 104, []byte{1, 0, 0, 0}))
	f.Add([]byte("\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f\x20"))
	// IPv6, with a v4-mapped address.
	f.Add([]byte("\x01\x00\x03\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\xff\xff\x0a\x00\x00\x07\x68\xff\x07\x00\x00\x00\x28\x10\x02\x71\x12\xb7"))
	f.Fuzz(func(t *testing.T, b []byte) {
		parseRecvCmsgs(b)
		errQueueOrigin(b)
		var sa [sockaddrSize]byte
		copy(sa[:], b)
		sockaddrAddrPort(&sa, len(b))

		var raw [40]byte
		copy(raw[:], b)
		v6 := raw[0]&1 != 0
		order := raw[1]
		u32 := func(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }
		var want recvCmsgs
		var msgs [][]byte
		if v6 {
			want.dst = netip.AddrFrom16([16]byte(raw[4:20]))
			pkt := make([]byte, unix.SizeofInet6Pktinfo)
			copy(pkt, raw[4:20])
			msgs = append(msgs, cmsgBytes(unix.IPPROTO_IPV6, unix.IPV6_PKTINFO, pkt))
			want.tos, want.ttl = raw[20], raw[21]
			msgs = append(msgs, cmsgBytes(unix.IPPROTO_IPV6, unix.IPV6_TCLASS, u32(uint32(raw[20]))),
				cmsgBytes(unix.IPPROTO_IPV6, unix.IPV6_HOPLIMIT, u32(uint32(raw[21]))))
		} else {
			want.dst = netip.AddrFrom4([4]byte(raw[4:8]))
			pkt := make([]byte, unix.SizeofInet4Pktinfo)
			copy(pkt[4:8], raw[8:12]) // ipi_spec_dst: not the destination
			copy(pkt[8:12], raw[4:8])
			msgs = append(msgs, cmsgBytes(unix.IPPROTO_IP, unix.IP_PKTINFO, pkt))
			want.tos, want.ttl = raw[20], raw[21]
			msgs = append(msgs, cmsgBytes(unix.IPPROTO_IP, unix.IP_TOS, raw[20:21]),
				cmsgBytes(unix.IPPROTO_IP, unix.IP_TTL, u32(uint32(raw[21]))))
		}
		if raw[2]&1 != 0 {
			want.drops, want.haveDrops = binary.NativeEndian.Uint32(raw[22:]), true
			msgs = append(msgs, cmsgBytes(unix.SOL_SOCKET, unix.SO_RXQ_OVFL, raw[22:26]))
		}
		if raw[2]&2 != 0 {
			want.gso = int(binary.NativeEndian.Uint16(raw[26:])) // a gso_size fits 16 bits
			msgs = append(msgs, cmsgBytes(unix.SOL_UDP, unix.UDP_GRO, u32(uint32(want.gso))))
		}
		// The extended error of an error-queue read: ee_errno, ee_origin.
		origin := int(raw[28])
		ee := make([]byte, unsafe.Sizeof(unix.SockExtendedErr{}))
		copy(ee, raw[29:])
		ee[4] = raw[28]
		errLevel, errType := int32(unix.IPPROTO_IP), int32(unix.IP_RECVERR)
		if v6 {
			errLevel, errType = unix.IPPROTO_IPV6, unix.IPV6_RECVERR
		}
		// Rotate the messages by the input, and put an unknown one with
		// the input as its data in front.
		k := int(order) % len(msgs)
		msgs = append(msgs[k:], msgs[:k]...)
		oob := cmsgBytes(unix.IPPROTO_IP, unix.IP_OPTIONS, b)
		for _, m := range msgs {
			oob = append(oob, m...)
		}
		require.Equal(t, want, parseRecvCmsgs(oob), "%x", oob)
		require.Equal(t, -1, errQueueOrigin(oob), "no extended error")
		oob = append(oob, cmsgBytes(errLevel, errType, ee)...)
		require.Equal(t, origin, errQueueOrigin(oob))
		require.Equal(t, want, parseRecvCmsgs(oob), "an error message changes nothing")

		// sockaddr round trip, without zones (the scope ID names a real
		// interface or reads back as its number).
		ap := netip.AddrPortFrom(want.dst, binary.BigEndian.Uint16(raw[30:]))
		n := putSockaddr(&sa, ap, v6)
		wantAP := netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
		require.Equal(t, wantAP, sockaddrAddrPort(&sa, n))
		require.Equal(t, netip.AddrPort{}, sockaddrAddrPort(&sa, n-1), "a short sockaddr")
	})
}
