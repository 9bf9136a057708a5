package netdev

// Default socket buffer sizes, asked for when Options leaves them zero.
const (
	// DefaultRecvBuffer is the default receive buffer request: 64 MiB,
	// enough for a fast sender over loopback to lose nothing (a 208 KiB
	// buffer loses 5–25%). Without CAP_NET_ADMIN the kernel caps it at
	// net.core.rmem_max.
	DefaultRecvBuffer = 64 << 20

	// DefaultSendBuffer is the default send buffer request: 4 MiB. Without
	// CAP_NET_ADMIN the kernel caps it at net.core.wmem_max.
	DefaultSendBuffer = 4 << 20
)

// Options configures ListenUDP. The zero value is a good default.
type Options struct {
	// BatchSize is the number of datagrams one recvmmsg or sendmmsg call
	// handles. Zero means DefaultBatchSize (64); values above MaxBatchSize
	// are clamped.
	BatchSize int

	// RecvBuffer and SendBuffer are the socket buffer sizes to ask for, in
	// bytes. Zero means DefaultRecvBuffer and DefaultSendBuffer; a negative
	// value keeps the kernel's default. The request is made with
	// SO_RCVBUFFORCE / SO_SNDBUFFORCE first (needs CAP_NET_ADMIN) and falls
	// back to SO_RCVBUF / SO_SNDBUF, which the kernel caps silently;
	// UDPConn.BufferSizes reports the result.
	RecvBuffer, SendBuffer int

	// NoForce skips SO_RCVBUFFORCE / SO_SNDBUFFORCE and asks with the
	// plain options only, which the kernel caps at net.core.rmem_max /
	// wmem_max: what a process without CAP_NET_ADMIN gets, for tests and
	// measurements run as root.
	NoForce bool

	// TOS is the IPv4 Type of Service byte or the IPv6 Traffic Class
	// (DSCP << 2 | ECN) of every datagram sent. Zero leaves the kernel's
	// default, which is also zero.
	TOS uint8

	// BlockingWrite makes WriteBatch wait (parked in the runtime poller)
	// while the socket send buffer is full, as net.UDPConn does. By default
	// WriteBatch does not wait: it reports a full send buffer as a
	// DropError with EAGAIN, so the caller can apply its own back-pressure.
	// Drops with ENOBUFS are reported either way.
	BlockingWrite bool

	// NoGSO turns off UDP generic segmentation offload on send. By
	// default (where the kernel offers UDP_SEGMENT) WriteBatch sends a run
	// of consecutive messages with the same destination, source and size
	// (the last may be shorter) as one buffer that the kernel splits into
	// those datagrams: one pass through the stack for up to 64 datagrams.
	// IPv4 runs are coalesced only with RewriteIPv4ID set. If the kernel
	// refuses a GSO send (EIO from a device without checksum offload,
	// EINVAL) and takes its first datagram alone, the UDPConn stops using
	// GSO and sends the datagrams one by one (Stats.GSOFallbacks).
	NoGSO bool

	// NoGRO turns off UDP generic receive offload. By default (where the
	// kernel offers UDP_GRO) the kernel may deliver several datagrams of a
	// flow as one buffer, and ReadBatch splits it into its datagrams
	// without copying; see Message.
	NoGRO bool

	// RewriteIPv4ID lets an IPv4 UDPConn coalesce datagrams with GSO when
	// their payload depends on the IPv4 Identification the datagram is sent
	// with (the RoCEv2 ICRC covers it). The datagrams are built for ID 0,
	// the ID an unconnected socket with IP_PMTUDISC_DO gives each datagram;
	// the kernel gives the k-th segment of a GSO send (from 0) the ID k
	// (measured by TestGSOSegmentIDs). WriteBatch calls
	// RewriteIPv4ID(dgram, 0, k) on each segment with k > 0 before sending,
	// and RewriteIPv4ID(dgram, k, 0) on those it did not send before it
	// returns, so the caller may send them again. It must only change
	// dgram in place. Without it, IPv4 datagrams are never coalesced. IPv6
	// has no ID.
	RewriteIPv4ID func(dgram []byte, from, to uint16)

	// RunsByQPN coalesces into one GSO send only datagrams with the same
	// RoCE BTH destination QP (payload bytes 5-7): the receiving host picks
	// the socket of a ListenUDPGroup once per GSO buffer (or per GRO
	// buffer), by its first datagram's QPN.
	RunsByQPN bool
}

func (o Options) recvBuffer() int {
	if o.RecvBuffer == 0 {
		return DefaultRecvBuffer
	}
	return o.RecvBuffer
}

func (o Options) sendBuffer() int {
	if o.SendBuffer == 0 {
		return DefaultSendBuffer
	}
	return o.SendBuffer
}

// BufferSizes reports the socket buffer sizes the kernel granted, as
// getsockopt SO_RCVBUF / SO_SNDBUF returns them: on Linux twice the size
// set, the kernel's allowance for its own bookkeeping.
type BufferSizes struct {
	Recv, Send             int
	RecvForced, SendForced bool // the FORCE option was accepted (CAP_NET_ADMIN)
	// RecvAsked and SendAsked are the sizes asked for (0: the kernel's
	// default was kept).
	RecvAsked, SendAsked int
}

// RecvCapped reports whether the kernel granted less receive buffer than
// was asked for: without CAP_NET_ADMIN it caps SO_RCVBUF at
// net.core.rmem_max (and reports twice the capped size).
func (b BufferSizes) RecvCapped() bool { return b.RecvAsked > 0 && b.Recv < 2*b.RecvAsked }

// SendCapped reports whether the send buffer was capped
// (net.core.wmem_max).
func (b BufferSizes) SendCapped() bool { return b.SendAsked > 0 && b.Send < 2*b.SendAsked }
