// Package netdev moves datagrams in and out of gorxe, in batches. It knows
// nothing about RoCE: it carries opaque UDP payloads between addresses, and
// the rxe package demultiplexes them by QPN.
//
// There are two implementations of the small Conn interface:
//
//   - UDPConn (ListenUDP): a real IPv4 or IPv6 UDP socket, read and written
//     with the recvmmsg and sendmmsg system calls (golang.org/x/sys/unix),
//     with every message header, I/O vector, socket address and control
//     buffer allocated once per connection, and with UDP GSO on send and
//     UDP GRO on receive where the kernel offers them.
//   - PipeConn (NewPipe): an in-memory pair of endpoints over channels, with
//     the copy semantics and the local-drop errors of a socket but no file
//     descriptor, so tests can run inside testing/synctest bubbles.
//
// # Why the socket is set up the way it is
//
// The RoCEv2 ICRC covers the IPv4 header's Identification and Flags fields
// (they are not among the variant fields that rxe_icrc_hdr masks), so a
// sender must know their values before the kernel builds the header. An
// unconnected IPv4 UDP socket with IP_MTU_DISCOVER = IP_PMTUDISC_DO sends
// every datagram with DF set and ID 0 (Linux ip_select_ident_segs: DF and no
// connected destination gives ID 0), so the socket is never connect()ed and
// always uses PMTUDISC_DO. The price is that a datagram larger than the path
// MTU fails with EMSGSIZE instead of being fragmented; RoCE never wants
// fragments anyway. IPv6 sockets use IPV6_PMTUDISC_DO for the same reason,
// are always IPV6_V6ONLY (no v4-mapped traffic: the ICRC pseudo-header
// differs between the families), and set UDP_NO_CHECK6_RX so that the zero
// UDP checksums that kernel rxe sends are accepted.
//
// IP_RECVERR (IPV6_RECVERR) is set so that a datagram dropped by the local
// qdisc or device queue is reported to the sender as ENOBUFS. Without it the
// kernel counts the drop in SndbufErrors and reports success, and a RoCE
// requester only learns about the loss after a full retransmit timeout.
//
// The socket's receive and send buffers are enlarged (SO_RCVBUFFORCE and
// SO_SNDBUFFORCE, which need CAP_NET_ADMIN, falling back to SO_RCVBUF and
// SO_SNDBUF, which the kernel caps at net.core.rmem_max/wmem_max); with the
// default 208 KiB receive buffer a fast sender loses 5–25% of its datagrams at
// the receiver. BufferSizes reports what the kernel granted.
//
// A datagram to a destination on the loopback path (a loopback address or
// the socket's own address) goes out with a UDP_SEGMENT control message
// even when it is alone, which makes the kernel build it in page
// fragments rather than in one power-of-two buffer (paged_linux.go): the
// receiving socket on this host is then charged its length plus about
// 1 KiB (PagedTruesize) instead of 8 KiB for a 4 KiB RoCE packet, so a
// receive buffer capped at rmem_max holds half as many again. The
// datagram on the wire is the same. UDPConn.PagesTo tells rxe which
// destinations get this, for its PSN window.
//
// When the socket is bound to a wildcard address, IP_PKTINFO
// (IPV6_RECVPKTINFO) tells each received datagram's destination address,
// which the RoCE layer needs to rebuild the ICRC pseudo-header; on write,
// Message.Local selects the source address in the same way.
//
// # Errors
//
// Local send failures are never hidden. WriteBatch reports a datagram the
// local host refused with a DropError: errors.Is(err, ErrLocalDrop) holds for
// every such drop, and errors.Is(err, syscall.ENOBUFS) or
// errors.Is(err, syscall.EAGAIN) tells which. ENOBUFS means a full qdisc or
// device queue. EAGAIN means a full socket send buffer and is reported only
// when Options.BlockingWrite is false (the default): the write path then
// reports EAGAIN from sendmmsg at once instead of parking the goroutine in
// the runtime poller as net.UDPConn does. A
// PipeConn whose queue is full returns the ENOBUFS form of the same error,
// so back-pressure code paths can be tested without sockets. The caller
// decides what a local drop means (a RoCE sender re-sends after a short
// timer; see package retry).
//
// WriteBatch also hides two quirks of sendmmsg: it returns -1 with the
// error when the first datagram fails, and a short count with no error when
// a later one fails (the kernel drops that error). WriteBatch turns the
// first into n = 0 and answers the second by sending the rest again, so
// either the rest goes out or its error is reported.
//
// With IP_RECVERR, an ICMP error caused by an earlier datagram (port
// unreachable from a peer that went away, host unreachable, fragmentation
// needed) is queued on the socket and makes the next read or write fail
// with ECONNREFUSED, EHOSTUNREACH and so on, although nothing is wrong with
// that read or write. UDPConn treats these as non-fatal: it drains the
// socket's error queue (whose entries are charged to the receive buffer),
// counts the errors in Stats.ICMPErrors and retries, so reads and writes go
// on. Such an error that arrives while the send buffer is more than half
// full wakes the Go runtime's poller with EPOLLERR alone, after which the
// runtime refuses to wait for reads ("not pollable") until the socket's
// next event; ReadBatch then waits in poll(2) itself instead.
//
// Close unblocks a pending ReadBatch and WriteBatch; they return an error
// wrapping net.ErrClosed.
//
// # Segmentation offload
//
// With UDP GSO (UDP_SEGMENT, Linux 4.18) WriteBatch hands the kernel a run
// of consecutive messages with the same destination, source and size (the
// last may be shorter) as one buffer of up to 64 datagrams, described by an
// I/O vector per message (no copy), and the kernel splits it into those
// datagrams: one pass through the stack instead of one per datagram. The
// kernel gives the k-th datagram of a GSO send the IPv4 ID k (the unsegmented
// buffer has ID 0; TestGSOSegmentIDs captures it on a veth), so a payload
// that covers the ID is corrected through Options.RewriteIPv4ID; IPv4 runs
// are coalesced only with it. With Options.RunsByQPN a run also holds one
// RoCE destination QP only: a receiving ListenUDPGroup picks its socket once
// per buffer, by the first datagram's QPN. A GSO send the kernel refuses
// (EIO, EINVAL) turns GSO off for the connection and the datagrams go one by
// one, once the first of them has gone out alone without UDP_SEGMENT: if
// that fails too, the error is the datagram's own (EINVAL for port 0 or a
// multicast source) and is returned with GSO kept on. The errnos a queued
// ICMP error leaves (ENOPROTOOPT, EOPNOTSUPP and the others of
// icmp_err_convert) are not refusals. A GSO buffer the local host refuses
// with ENOBUFS is reported as any local drop, and it halves the bytes the
// next buffers may carry (at least one datagram; Stats.GSOShrinks and
// GSOLimit), which doubles again at most once a second: a qdisc whose
// queue limit is below the buffer's length (tbf with a small limit, as
// docs/seed002.md's bench sets) drops the unsegmented buffer whole, so the
// same buffer sent again would never pass. A buffer is at most 65535 bytes
// as a qdisc counts it, each datagram's Ethernet, IP and UDP headers
// included: tbf segments a longer one and drops, without an error, its
// datagrams beyond the queue limit.
//
// With UDP GRO (UDP_GRO, Linux 5.0) the kernel may deliver several datagrams
// of one flow as one buffer, with the segment size in a control message;
// ReadBatch receives into 64 KiB buffers of its own and returns each
// datagram as a slice of one, valid until the next ReadBatch.
//
// A received datagram longer than its buffer (MSG_TRUNC), and a received
// buffer whose control data the kernel truncated (MSG_CTRUNC: its GRO
// segment size or IP_PKTINFO destination may be missing), is dropped and
// counted in Stats.Truncated or Stats.ControlTruncated rather than returned
// with a wrong length, datagram count or Local.
//
// # Allocations
//
// ReadBatch and WriteBatch allocate nothing in steady state (errors and
// link-local IPv6 zones aside): the system calls run in RawConn.Read and
// Write with function values made once per connection.
package netdev
