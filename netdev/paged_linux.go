package netdev

import (
	"net/netip"

	"golang.org/x/sys/unix"
)

// Paged sends. A UDP datagram sent without UDP_SEGMENT is built in one
// linear kernel buffer, a power of two large enough for it (8 KiB for a
// 4 KiB RoCE packet); one sent with UDP_SEGMENT, even a single segment no
// longer than the segment size, is built in page fragments holding just
// its bytes (__ip_append_data: paged when the cork has a GSO size, and
// udp_send_skb segments nothing when the datagram fits one segment). On
// the wire the two are the same datagram. On a path that stays in this
// host (the loopback device) the receiving socket is charged the sender's
// buffer (skb->truesize), so paged datagrams let twice as many 4 KiB
// packets into a receive buffer capped by net.core.rmem_max.

// probePaged reports whether the kernel accepts UDP_SEGMENT on fd, which
// paged sends need (Linux 4.18).
func probePaged(fd int) bool {
	return unix.SetsockoptInt(fd, unix.SOL_UDP, unix.UDP_SEGMENT, 0) == nil
}

// PagesTo reports whether the datagrams c sends to dst go out in page
// fragments: the kernel takes UDP_SEGMENT on c's socket, has not refused
// it for a single datagram, and dst is on the loopback path (a loopback
// address or c's own bound address), where the receiver is charged the
// datagram's length plus a fixed overhead (rxe sizes its PSN window by it)
// and where a datagram of any RoCE size fits the device MTU.
func (c *UDPConn) PagesTo(dst netip.Addr) bool {
	if !c.paged.Load() {
		return false
	}
	dst = dst.Unmap()
	return dst.IsLoopback() || (dst.IsValid() && !dst.IsUnspecified() && dst == c.local.Addr())
}

// RunsTo reports whether c sends runs of equal-size datagrams to dst as
// single GSO buffers that stay whole on their way to a socket of this
// host: PagesTo(dst) and UDP_SEGMENT in use. Whether the receiving socket
// takes them whole depends on its UDP_GRO (GRO); rxe assumes that a peer
// on the loopback path has it when its own socket does (RunTruesize).
func (c *UDPConn) RunsTo(dst netip.Addr) bool { return c.PagesTo(dst) && c.gso.Load() }

// GRO reports whether c's socket has UDP_GRO on: it receives a GSO run of
// this host whole, as one buffer charged once (RunTruesize).
func (c *UDPConn) GRO() bool { return c.gro }
