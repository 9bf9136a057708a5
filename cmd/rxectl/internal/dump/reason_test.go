package dump

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/packet"
)

// roceFrame wraps roce, the bytes of a UDP payload to port 4791, in an
// Ethernet, IPv4 and UDP header with lengths that fit it.
func roceFrame(roce []byte) []byte {
	udp := binary.BigEndian.AppendUint16(nil, 49152)
	udp = binary.BigEndian.AppendUint16(udp, packet.UDPPort)
	udp = binary.BigEndian.AppendUint16(udp, uint16(packet.UDPHeaderSize+len(roce)))
	udp = append(append(udp, 0, 0), roce...)
	ip := []byte{0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2}
	binary.BigEndian.PutUint16(ip[2:], uint16(packet.IPv4HeaderSize+len(udp)))
	binary.BigEndian.PutUint16(ip[10:], packet.IPv4HeaderChecksum(ip))
	return append(append(append(make([]byte, 12), 0x08, 0x00), ip...), udp...)
}

// bthBytes returns a BTH of opcode op, pad count pad and TVer tver
// followed by n more bytes (headers, payload, pad, ICRC).
func bthBytes(op packet.Opcode, pad, tver uint8, n int) []byte {
	b := make([]byte, packet.BTHSize+n)
	b[0], b[1], b[2], b[3] = byte(op), pad<<4|tver, 0xFF, 0xFF
	b[7] = 0x11
	return b
}

// TestMalformedReasons: the line of a datagram to a RoCEv2 port that does
// not parse says what is wrong with it in numbers, not only which rule it
// breaks: the opcode that is unknown (IBA 9.2: 0xC0-0xFF are manufacturer
// specific, the others the IBA reserves), the TVer that is not 0, the pad
// count or length that does not fit the opcode (packet.Parse's rules), and
// which IP or UDP length field does not fit the bytes the frame holds.
func TestMalformedReasons(t *testing.T) {
	ipEdit := func(frame []byte, edit func(ip []byte)) []byte {
		ip := frame[14:]
		edit(ip)
		ip[10], ip[11] = 0, 0
		binary.BigEndian.PutUint16(ip[10:], packet.IPv4HeaderChecksum(ip[:packet.IPv4HeaderSize]))
		return frame
	}
	send := roceFrame(bthBytes(packet.RCSendOnly, 0, 0, 8+4))
	tests := []struct {
		name  string
		frame []byte
		err   error
		want  string
	}{
		{"manufacturer-specific opcode", roceFrame(bthBytes(0xC0, 0, 0, 20)), packet.ErrUnknownOpcode,
			"MALFORMED: packet: unknown opcode: 0xc0 (manufacturer-specific) (32 bytes)\n"},
		{"reserved RC opcode", roceFrame(bthBytes(0x1F, 0, 0, 20)), packet.ErrUnknownOpcode,
			"MALFORMED: packet: unknown opcode: 0x1f (reserved) (32 bytes)\n"},
		{"TVer 3", roceFrame(bthBytes(packet.RCSendOnly, 0, 3, 20)), packet.ErrBadTransportVersion,
			"MALFORMED: packet: transport header version not 0: 3 (32 bytes)\n"},
		{"ACK with 4 bytes more", roceFrame(bthBytes(packet.RCAcknowledge, 0, 0, 4+4+4)), packet.ErrBadLength,
			"MALFORMED: packet: bad payload length for opcode: RC_ACKNOWLEDGE carries no payload, yet 4 bytes follow its headers (24 bytes)\n"},
		{"ACK with a pad count", roceFrame(bthBytes(packet.RCAcknowledge, 2, 0, 4+4)), packet.ErrBadPadding,
			"MALFORMED: packet: bad pad count: 2 on RC_ACKNOWLEDGE, which carries no payload (20 bytes)\n"},
		{"pad count beyond the payload", roceFrame(bthBytes(packet.RCSendOnly, 3, 0, 1+4)), packet.ErrBadPadding,
			"MALFORMED: packet: bad pad count: 3, more than the 1 byte between RC_SEND_ONLY's headers and its ICRC (17 bytes)\n"},
		{"READ request cut inside its RETH", roceFrame(bthBytes(packet.RCRDMAReadRequest, 0, 0, 4+4)), packet.ErrTruncated,
			"MALFORMED: packet: truncated: RC_RDMA_READ_REQUEST takes at least 32 bytes (20 bytes)\n"},
		{"shorter than a BTH and an ICRC", roceFrame(make([]byte, 8)), packet.ErrTruncated,
			"MALFORMED: packet: truncated: a RoCE packet takes at least 16 bytes, a BTH and an ICRC (8 bytes)\n"},
		{"ATOMIC WRITE of 4 bytes", roceFrame(bthBytes(packet.RCAtomicWrite, 0, 0, 16+4+4)), packet.ErrBadLength,
			"MALFORMED: packet: bad payload length for opcode: RC_ATOMIC_WRITE carries 8 payload bytes, not 4 (36 bytes)\n"},
		{"IPv4 total length beyond the frame", ipEdit(send, func(ip []byte) { binary.BigEndian.PutUint16(ip[2:], 100) }), packet.ErrBadIPHeader,
			"MALFORMED: packet: malformed IP/UDP header: IPv4 total length 100, but the frame holds 52 bytes of IP\n"},
		{"UDP length beyond the IP payload", roceFrame(bthBytes(packet.RCSendOnly, 0, 0, 8+4)), packet.ErrBadIPHeader,
			"MALFORMED: packet: malformed IP/UDP header: UDP length 36, but the IP packet holds 32 bytes of UDP\n"},
	}
	// Its UDP length says 8 bytes more than the IP packet holds.
	binary.BigEndian.PutUint16(tests[len(tests)-1].frame[14+20+4:], 8+20+8)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := Frame{Num: 1, CapLen: len(tc.frame), OrigLen: len(tc.frame)}
			DecodeFrame(&f, tc.frame, packet.LinkEthernet, Ports{packet.UDPPort})
			require.Equal(t, KindMalformed, f.Kind)
			require.ErrorIs(t, f.Err, tc.err)
			line := string(AppendText(nil, &f, []byte("0"), false))
			require.Equal(t, "    1 0 10.0.0.1:49152 → 10.0.0.2:4791 "+tc.want, line)
		})
	}
}
