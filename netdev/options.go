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
}
