package netdev

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// xnetErr wraps an errno the way x/net's WriteBatch and ReadBatch report it.
func xnetErr(op string, errno syscall.Errno) error {
	return &net.OpError{Op: op, Net: "udp", Err: os.NewSyscallError(op+"mmsg", errno)}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		name  string
		err   error
		class errClass
		errno syscall.Errno
	}{
		{"nil", nil, classOther, 0},
		{"ENOBUFS from sendmmsg", xnetErr("send", syscall.ENOBUFS), classNoBufs, syscall.ENOBUFS},
		{"bare ENOBUFS", syscall.ENOBUFS, classNoBufs, syscall.ENOBUFS},
		{"EAGAIN", xnetErr("send", syscall.EAGAIN), classWouldBlock, syscall.EAGAIN},
		{"EWOULDBLOCK is EAGAIN", xnetErr("send", syscall.EWOULDBLOCK), classWouldBlock, syscall.EAGAIN},
		{"ECONNREFUSED on read", xnetErr("recv", syscall.ECONNREFUSED), classICMP, syscall.ECONNREFUSED},
		{"EHOSTUNREACH", xnetErr("send", syscall.EHOSTUNREACH), classICMP, syscall.EHOSTUNREACH},
		{"ENETUNREACH", xnetErr("send", syscall.ENETUNREACH), classICMP, syscall.ENETUNREACH},
		{"EMSGSIZE", xnetErr("send", syscall.EMSGSIZE), classICMP, syscall.EMSGSIZE},
		{"EPROTO", xnetErr("recv", syscall.EPROTO), classICMP, syscall.EPROTO},
		{"EACCES", xnetErr("send", syscall.EACCES), classICMP, syscall.EACCES},
		// icmp_err_convert: host unknown, host isolated, protocol
		// unreachable, source route failed.
		{"EHOSTDOWN", xnetErr("send", syscall.EHOSTDOWN), classICMP, syscall.EHOSTDOWN},
		{"ENONET", xnetErr("send", syscall.ENONET), classICMP, syscall.ENONET},
		{"ENOPROTOOPT", xnetErr("recv", syscall.ENOPROTOOPT), classICMP, syscall.ENOPROTOOPT},
		{"EOPNOTSUPP", xnetErr("recv", syscall.EOPNOTSUPP), classICMP, syscall.EOPNOTSUPP},
		{"EINVAL", xnetErr("send", syscall.EINVAL), classOther, syscall.EINVAL},
		{"closed", &net.OpError{Op: "read", Net: "udp", Err: net.ErrClosed}, classClosed, 0},
		{"closed, wrapped", fmt.Errorf("x: %w", net.ErrClosed), classClosed, 0},
		{"not an errno", errors.New("boom"), classOther, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			class, errno := classify(tc.err)
			require.Equal(t, tc.class, class, "class %v", class)
			require.Equal(t, tc.errno, errno)
		})
	}
}

// TestLocalDrops: every datagram the local host refused, ENOBUFS and
// EAGAIN alike.
func TestLocalDrops(t *testing.T) {
	require.Equal(t, uint64(5), Stats{NoBufs: 2, WouldBlock: 3, ICMPErrors: 7, Truncated: 11}.LocalDrops())
}

func TestDropError(t *testing.T) {
	tests := []struct {
		class errClass
		errno syscall.Errno
	}{
		{classNoBufs, syscall.ENOBUFS},
		{classWouldBlock, syscall.EAGAIN},
	}
	for _, tc := range tests {
		t.Run(tc.class.String(), func(t *testing.T) {
			err := dropError(tc.class)
			require.ErrorIs(t, err, ErrLocalDrop)
			require.ErrorIs(t, err, tc.errno)
			require.NotErrorIs(t, err, net.ErrClosed)
			var d DropError
			require.ErrorAs(t, err, &d)
			require.Equal(t, tc.errno, d.Errno)
			require.Contains(t, err.Error(), tc.errno.Error())
			wrapped := fmt.Errorf("qp 17: %w", err)
			require.ErrorIs(t, wrapped, ErrLocalDrop)
			require.ErrorIs(t, wrapped, tc.errno)
		})
	}
	for _, c := range []errClass{classOther, classClosed, classICMP} {
		require.NoError(t, dropError(c), c.String())
	}
	require.NotErrorIs(t, syscall.ENOBUFS, ErrLocalDrop, "a bare errno is not a DropError")
	require.Zero(t, testing.AllocsPerRun(100, func() { _ = dropError(classNoBufs) }))
}

// cmsgBytes builds a control message the way the kernel lays it out.
func cmsgBytes(level, typ int32, data []byte) []byte {
	b := make([]byte, unix.CmsgSpace(len(data)))
	copy(putCmsgHdr(b, level, typ, len(data)), data)
	return b
}

// shortCmsg returns a copy of the control message m whose cmsg_len is
// less than its header, which __cmsg_nxthdr-style walks treat as the end.
func shortCmsg(m []byte) []byte {
	b := append([]byte(nil), m...)
	if cmsgLenSize == 8 {
		binary.NativeEndian.PutUint64(b, 8)
	} else {
		binary.NativeEndian.PutUint32(b, 8)
	}
	return b
}

// cmsgWithLen returns a copy of the control message m whose cmsg_len is l.
func cmsgWithLen(m []byte, l int) []byte {
	b := append([]byte(nil), m...)
	if cmsgLenSize == 8 {
		binary.NativeEndian.PutUint64(b, uint64(l))
	} else {
		binary.NativeEndian.PutUint32(b, uint32(l))
	}
	return b
}

func TestParseRecvCmsgs(t *testing.T) {
	var ovfl [4]byte
	binary.NativeEndian.PutUint32(ovfl[:], 7)
	pkt4 := make([]byte, unix.SizeofInet4Pktinfo)
	copy(pkt4[4:8], []byte{10, 0, 0, 9}) // ipi_spec_dst: not the header destination
	copy(pkt4[8:12], []byte{127, 0, 0, 3})
	pkt6 := make([]byte, unix.SizeofInet6Pktinfo)
	copy(pkt6, netip.MustParseAddr("fd00::42").AsSlice())
	ovflMsg := cmsgBytes(unix.SOL_SOCKET, unix.SO_RXQ_OVFL, ovfl[:])

	int4 := func(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }
	v4 := netip.MustParseAddr("127.0.0.3")
	v6 := netip.MustParseAddr("fd00::42")
	tests := []struct {
		name string
		oob  []byte
		want recvCmsgs
	}{
		{"empty", nil, recvCmsgs{}},
		{"v4 pktinfo", cmsgBytes(unix.IPPROTO_IP, unix.IP_PKTINFO, pkt4), recvCmsgs{dst: v4}},
		{"v6 pktinfo", cmsgBytes(unix.IPPROTO_IPV6, unix.IPV6_PKTINFO, pkt6), recvCmsgs{dst: v6}},
		{"overflow only", ovflMsg, recvCmsgs{drops: 7, haveDrops: true}},
		{"pktinfo then overflow", append(cmsgBytes(unix.IPPROTO_IP, unix.IP_PKTINFO, pkt4), ovflMsg...),
			recvCmsgs{dst: v4, drops: 7, haveDrops: true}},
		{"overflow then v6 pktinfo", append(append([]byte{}, ovflMsg...), cmsgBytes(unix.IPPROTO_IPV6, unix.IPV6_PKTINFO, pkt6)...),
			recvCmsgs{dst: v6, drops: 7, haveDrops: true}},
		{"truncated header", ovflMsg[:5], recvCmsgs{}},
		{"length beyond buffer", ovflMsg[:unix.CmsgLen(2)], recvCmsgs{}},
		{"length below the header", shortCmsg(ovflMsg), recvCmsgs{}},
		{"length one below the data", cmsgWithLen(ovflMsg, cmsgDataOff-1), recvCmsgs{}},
		{"length one beyond the buffer", cmsgWithLen(ovflMsg, len(ovflMsg)+1), recvCmsgs{}},
		{"short pktinfo ignored", cmsgBytes(unix.IPPROTO_IP, unix.IP_PKTINFO, pkt4[:8]), recvCmsgs{}},
		{"unknown type skipped", append(cmsgBytes(unix.IPPROTO_IP, unix.IP_OPTIONS, []byte{1, 1, 1, 1}), ovflMsg...),
			recvCmsgs{drops: 7, haveDrops: true}},
		// ip_cmsg_recv_tos gives the TOS byte, ip_cmsg_recv_ttl an int.
		{"v4 tos and ttl", append(cmsgBytes(unix.IPPROTO_IP, unix.IP_TTL, int4(63)), cmsgBytes(unix.IPPROTO_IP, unix.IP_TOS, []byte{0xb8})...),
			recvCmsgs{tos: 0xb8, ttl: 63}},
		{"v6 tclass and hop limit", append(cmsgBytes(unix.IPPROTO_IPV6, unix.IPV6_HOPLIMIT, int4(255)), cmsgBytes(unix.IPPROTO_IPV6, unix.IPV6_TCLASS, int4(0x68))...),
			recvCmsgs{tos: 0x68, ttl: 255}},
		{"v4 ttl too short ignored", cmsgBytes(unix.IPPROTO_IP, unix.IP_TTL, []byte{63}), recvCmsgs{}},
		{"gro segment", cmsgBytes(unix.SOL_UDP, unix.UDP_GRO, int4(4136)), recvCmsgs{gso: 4136}},
		{"gro segment as a u16", cmsgBytes(unix.SOL_UDP, unix.UDP_GRO, binary.NativeEndian.AppendUint16(nil, 4136)), recvCmsgs{gso: 4136}},
		{"gro segment too short ignored", cmsgBytes(unix.SOL_UDP, unix.UDP_GRO, []byte{1}), recvCmsgs{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, parseRecvCmsgs(tc.oob))
		})
	}
}

func TestPutSourceCmsg(t *testing.T) {
	tests := []struct {
		src        string
		level, typ int32
		off        int
	}{
		{"127.0.0.2", unix.IPPROTO_IP, unix.IP_PKTINFO, 4}, // ipi_spec_dst
		{"2001:db8::1", unix.IPPROTO_IPV6, unix.IPV6_PKTINFO, 0},
	}
	for _, tc := range tests {
		t.Run(tc.src, func(t *testing.T) {
			src := netip.MustParseAddr(tc.src)
			b := make([]byte, sendOOBSize)
			for i := range b {
				b[i] = 0xAA // must be overwritten
			}
			n := putSourceCmsg(b, src)
			m, rest, ok := nextCmsg(b[:n])
			require.True(t, ok)
			require.Empty(t, rest)
			require.Equal(t, tc.level, m.level)
			require.Equal(t, tc.typ, m.typ)
			require.Equal(t, src.AsSlice(), m.data[tc.off:tc.off+len(src.AsSlice())])
			if src.Is4() {
				require.Equal(t, make([]byte, 4), m.data[0:4], "ifindex 0")
				require.Equal(t, make([]byte, 4), m.data[8:12])
			} else {
				require.Equal(t, make([]byte, 4), m.data[16:20], "ifindex 0")
			}
		})
	}
}

func TestErrQueueOrigin(t *testing.T) {
	ee := func(origin uint8) []byte {
		b := make([]byte, 16)
		b[4] = origin
		return b
	}
	require.Equal(t, -1, errQueueOrigin(nil))
	require.Equal(t, unix.SO_EE_ORIGIN_ICMP, errQueueOrigin(cmsgBytes(unix.IPPROTO_IP, unix.IP_RECVERR, ee(unix.SO_EE_ORIGIN_ICMP))))
	require.Equal(t, unix.SO_EE_ORIGIN_ICMP6, errQueueOrigin(cmsgBytes(unix.IPPROTO_IPV6, unix.IPV6_RECVERR, ee(unix.SO_EE_ORIGIN_ICMP6))))
	require.Equal(t, unix.SO_EE_ORIGIN_LOCAL, errQueueOrigin(cmsgBytes(unix.IPPROTO_IP, unix.IP_RECVERR, ee(unix.SO_EE_ORIGIN_LOCAL))))
	require.Equal(t, -1, errQueueOrigin(cmsgBytes(unix.IPPROTO_IP, unix.IP_RECVERR, ee(2)[:8])), "short extended error")
}
