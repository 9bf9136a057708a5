package netdev

import (
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
)

// Batch sizes.
const (
	// DefaultBatchSize is the batch size used when Options.BatchSize or
	// PipeOptions.BatchSize is zero.
	DefaultBatchSize = 64

	// MaxBatchSize is the largest batch size: the kernel's limit on the
	// number of messages in one recvmmsg or sendmmsg call (UIO_MAXIOV).
	MaxBatchSize = 1024
)

// Message is one datagram. The datagram is always Buf[:N].
//
// ReadBatch receives into Buf[:cap(Buf)] and sets N, Addr (the sender) and
// Local (the address the datagram was sent to: from IP_PKTINFO or
// IPV6_PKTINFO when a UDPConn is bound to a wildcard address, else the bound
// address; a PipeConn's own address). It never changes Buf itself,
// so a slice of buffers can be reused call after call. A datagram longer than
// cap(Buf) is dropped and counted in Stats.Truncated, and one whose control
// data the kernel truncated in Stats.ControlTruncated. The exception is a
// UDPConn with UDP GRO (the default on Linux): it receives into buffers of
// its own, sets Buf to the datagram's place in one of them (len and cap N),
// and reuses that memory at the next ReadBatch, so a datagram must be
// consumed or copied before then.
//
// WriteBatch sends Buf[:N] to Addr; N must be in [0, cap(Buf)]. If Local is
// valid and not unspecified, it selects the source address of the datagram
// (UDPConn, with IP_PKTINFO / IPV6_PKTINFO); otherwise the kernel chooses,
// as it does for any unconnected socket. PipeConn ignores Local on write.
// If TOS is not 0 it is the datagram's IP traffic class (IPv4 TOS, IPv6
// Traffic Class), sent as an IP_TOS or IPV6_TCLASS control message
// (UDPConn); 0 leaves the socket's (Options.TOS). PipeConn carries it to
// the peer's ReadBatch. WriteBatch ignores TTL.
//
// ReadBatch also sets TOS and TTL: the received datagram's traffic class
// and its IPv4 TTL or IPv6 hop limit, where the Conn reports them (a
// UDPConn after ReportIPFields; a PipeConn reports the TOS its peer gave
// and no TTL). Both are 0 where they are not reported.
type Message struct {
	Buf   []byte
	N     int
	Addr  netip.AddrPort
	Local netip.Addr
	TOS   uint8
	TTL   uint8
}

// IPFieldReporter is a Conn that can be asked to report, in the Message of
// every datagram it receives from then on, the traffic class and TTL of
// the datagram's IP header (Message.TOS, Message.TTL). A UD receive copies
// the received IP header into the buffer's GRH area, as kernel rxe does
// (rxe_resp.c execute), and these are the fields of it a UDP socket can
// learn. Decorators (netdev/faults, netdev/pcapdump) pass the request to
// the Conn they wrap and return errors.ErrUnsupported if it cannot report.
type IPFieldReporter interface {
	ReportIPFields() error
}

// MulticastSender is a Conn whose datagrams to multicast groups can be
// set up to leave by the interface that carries a given address, with a
// given TTL or hop limit, and to loop back to the sockets of this host that
// joined the group (UDPConn.SetMulticastSend), and that opens the sockets
// that receive a group in its own network namespace
// (UDPConn.ListenMulticast). Decorators do not implement it: a caller
// looks through their Unwrap() Conn method.
type MulticastSender interface {
	SetMulticastSend(ifAddr netip.Addr, hops uint8) error
	ListenMulticast(group netip.AddrPort, ifAddr netip.Addr, opts Options) (*UDPConn, error)
}

// Conn sends and receives datagrams in batches.
//
// Ownership: a Conn keeps no reference to msgs or to their buffers after a
// call returns. On write the datagrams have been copied (to the kernel or to
// the pipe) when WriteBatch returns, so the buffers may be reused at once.
//
// Concurrency: one goroutine may call ReadBatch while another calls
// WriteBatch. Concurrent calls of the same method are safe but serialised.
// Close, BatchSize and LocalAddr may be called from any goroutine at any
// time.
type Conn interface {
	// ReadBatch blocks until at least one datagram has arrived, then fills
	// msgs[:n] with up to min(len(msgs), BatchSize()) datagrams and returns
	// n >= 1 and a nil error. When it returns an error, n is 0. If
	// len(msgs) is 0 it returns 0, nil at once. When it drops a truncated
	// datagram it may permute the Message values within msgs (the buffers
	// stay within msgs).
	ReadBatch(msgs []Message) (n int, err error)

	// WriteBatch sends msgs in order and returns how many went out (were
	// handed to the kernel or to the peer). n == len(msgs) exactly when err
	// is nil. Otherwise msgs[:n] went out, msgs[n] did not, and msgs[n+1:]
	// were not tried. If the local host refused msgs[n] (a full queue or
	// buffer), errors.Is(err, ErrLocalDrop) holds and the caller may send
	// msgs[n:] again later. Batches longer than BatchSize are split.
	WriteBatch(msgs []Message) (n int, err error)

	// BatchSize is the most datagrams one ReadBatch returns and one
	// system call sends.
	BatchSize() int

	// LocalAddr is the bound address and port (for a wildcard bind, the
	// unspecified address).
	LocalAddr() netip.AddrPort

	// Close closes the Conn. It unblocks pending ReadBatch and WriteBatch
	// calls, which then return an error wrapping net.ErrClosed, as do all
	// later calls. Closing twice is harmless.
	Close() error
}

// SharedReader is a Conn whose datagrams two kinds of reader can take in
// turn: one that blocks until datagrams arrive (ReadBatchGated) and ones
// that poll (TryReadBatch), such as a device's receive goroutine and a
// caller busy-polling a completion queue. The readers share the Conn's
// receive state under a Gate: each reads with the gate held and handles
// what it read before unlocking it, so datagrams are handled in the order
// they arrived. ReadBatch must not be used on the same Conn while they
// are. UDPConn implements it on Linux.
type SharedReader interface {
	Conn

	// ReadBatchGated is ReadBatch, except that it waits for datagrams
	// without holding gate and returns holding gate when n > 0 (the
	// caller unlocks it once it has handled msgs[:n]); when it returns an
	// error it does not hold gate. It never waits for gate: when a poller
	// holds it, ReadBatchGated leaves the datagrams to the poller (see
	// Gate.Unlock) and waits for the next ones.
	ReadBatchGated(msgs []Message, gate *Gate) (n int, err error)

	// TryReadBatch reads like ReadBatch but never waits: with no
	// datagram there it returns 0 and a nil error. The caller holds the
	// gate it gives ReadBatchGated. With UDP GRO the datagrams of a
	// coalesced buffer that did not fit msgs stay in the Conn, where no
	// new arrival signals them: a poller that got min(len(msgs),
	// BatchSize()) datagrams calls TryReadBatch again (after handling
	// them) before it leaves.
	TryReadBatch(msgs []Message) (n int, err error)
}

// AsSharedReader returns conn as a SharedReader if its datagrams can be
// read so: conn implements SharedReader and, if it also has a method
// SharesReads() bool (a decorator that can read in turn only when its
// inner Conn can, and only with some of its rules), that method returns
// true.
func AsSharedReader(conn Conn) (SharedReader, bool) {
	s, ok := conn.(SharedReader)
	if !ok {
		return nil, false
	}
	if d, ok := conn.(interface{ SharesReads() bool }); ok && !d.SharesReads() {
		return nil, false
	}
	return s, true
}

// Gate is the lock that a SharedReader's readers hold while they read and
// handle a batch. Only ReadBatchGated blocks, and never on the gate: when
// it finds the gate held it records that it left the socket to the holder
// and waits for readability, and the holder's Unlock then takes the gate
// back for it to read the socket until it is empty (else datagrams that
// arrived while the gate was held could wait for the next arrival). The
// zero Gate is unlocked.
type Gate struct {
	mu     sync.Mutex
	missed atomic.Bool // ReadBatchGated found the gate held and went back to waiting
}

// TryLock takes the gate if it is free and reports whether it did.
func (g *Gate) TryLock() bool { return g.mu.TryLock() }

// Unlock releases the gate. It returns true when it has taken the gate
// again for the caller because ReadBatchGated found it held meanwhile: the
// caller then reads with TryReadBatch, handling what it reads, until
// TryReadBatch returns 0 (or an error), and calls Unlock again.
func (g *Gate) Unlock() (retaken bool) {
	g.mu.Unlock()
	if !g.missed.Swap(false) {
		return false
	}
	return g.take()
}

// take takes the gate if it is free; otherwise it records a miss and tries
// once more, so that a holder unlocking between the two tries sees the
// miss (and takes the gate back to read) or leaves the gate free for the
// second try: no datagram is left unread with every reader waiting.
func (g *Gate) take() bool {
	if g.mu.TryLock() {
		return true
	}
	g.missed.Store(true)
	return g.mu.TryLock()
}

// Release unlocks the gate for a reader that is about to read the socket
// again or stop: a gate retaken by Unlock is unlocked again at once,
// without reading (the reader's next read, or a later one, takes what is
// there).
func (g *Gate) Release() {
	for g.Unlock() {
	}
}

// ErrLocalDrop matches (with errors.Is) every error that reports a datagram
// refused by the local host: ENOBUFS from a full qdisc or device queue,
// EAGAIN from a full send buffer, and a full PipeConn queue.
var ErrLocalDrop = errors.New("netdev: datagram dropped by the local host")

// ErrInvalidMessage is wrapped by the error WriteBatch returns for a Message
// it cannot send: N outside [0, cap(Buf)], or an address of the wrong family
// or not valid.
var ErrInvalidMessage = errors.New("netdev: invalid message")

// DropError reports a datagram that the local host refused to send. It
// matches ErrLocalDrop and unwraps to its Errno, so both
// errors.Is(err, ErrLocalDrop) and errors.Is(err, syscall.ENOBUFS) hold for
// a qdisc drop.
type DropError struct {
	// Errno is syscall.ENOBUFS (a full qdisc or device queue, or a full
	// PipeConn queue) or syscall.EAGAIN (a full socket send buffer).
	Errno syscall.Errno
}

// Error implements error.
func (e DropError) Error() string {
	return "netdev: datagram dropped by the local host: " + e.Errno.Error()
}

// Unwrap returns the Errno.
func (e DropError) Unwrap() error { return e.Errno }

// Is reports whether target is ErrLocalDrop.
func (e DropError) Is(target error) bool { return target == ErrLocalDrop }

// Preboxed drop errors: returning them allocates nothing.
var (
	errDropNoBufs     error = DropError{Errno: syscall.ENOBUFS}
	errDropWouldBlock error = DropError{Errno: syscall.EAGAIN}
)

// Stats is a snapshot of a Conn's counters. All counts start at zero when
// the Conn is created.
type Stats struct {
	PacketsSent     uint64 // datagrams handed to the kernel (or to the pipe peer)
	BytesSent       uint64 // their payload bytes
	PacketsReceived uint64 // datagrams returned by ReadBatch
	BytesReceived   uint64 // their payload bytes

	NoBufs     uint64 // local drops with ENOBUFS: qdisc or device queue full, or pipe queue full
	WouldBlock uint64 // local drops with EAGAIN: socket send buffer full (non-blocking writes only)
	ICMPErrors uint64 // ICMP errors from earlier datagrams (port unreachable…), absorbed and retried
	Truncated  uint64 // received datagrams longer than their buffer, dropped

	// ControlTruncated counts received buffers (a datagram, or with UDP
	// GRO a coalesced buffer of several) whose control data the kernel
	// truncated (MSG_CTRUNC), dropped: without it the UDP_GRO segment size
	// or the IP_PKTINFO destination address may be missing, and the buffer
	// would be returned as one datagram or with a wrong Local. UDPConn's
	// control buffers hold every control message it asks for, so this
	// stays 0 unless the kernel adds others. Always 0 for PipeConn.
	ControlTruncated uint64

	// RecvOverflows is the kernel's count of datagrams this socket dropped
	// on receive (full receive buffer), as of when the most recently
	// received datagram was queued (SO_RXQ_OVFL): drops after it show with
	// the next datagram. Always 0 for PipeConn.
	RecvOverflows uint64

	// Unroutable counts datagrams a PipeConn discarded because their Addr
	// was not the peer's address, as a network would. Always 0 for UDPConn.
	Unroutable uint64

	// GSOBuffers counts GSO sends: buffers of several datagrams that the
	// kernel segments (their datagrams count in PacketsSent).
	// GROBuffers counts received buffers that the kernel had coalesced
	// (their datagrams count in PacketsReceived). GSOFallbacks is 1 once a
	// UDPConn has stopped using GSO after the kernel refused a GSO send.
	// Always 0 for PipeConn.
	GSOBuffers, GROBuffers, GSOFallbacks uint64

	// GSOShrinks counts the GSO buffers the local host refused (ENOBUFS,
	// counted in NoBufs too) after which a UDPConn halved the bytes a GSO
	// buffer may carry: a qdisc whose queue is smaller than the buffer
	// drops it whole however empty it is. GSOLimit is that bound now, in
	// bytes as a qdisc counts them (payloads, and each datagram's
	// Ethernet, IP and UDP headers; 65535 at first); it doubles with a GSO buffer sent a second or more after it
	// last changed.
	// Always 0 for PipeConn.
	GSOShrinks, GSOLimit uint64
}

// LocalDrops is the number of datagrams the local host refused to send.
func (s Stats) LocalDrops() uint64 { return s.NoBufs + s.WouldBlock }

// counters are the atomic counters behind Stats.
type counters struct {
	packetsSent, bytesSent         atomic.Uint64
	packetsReceived, bytesReceived atomic.Uint64
	noBufs, wouldBlock             atomic.Uint64
	icmpErrors, truncated          atomic.Uint64
	controlTruncated               atomic.Uint64
	recvOverflows, unroutable      atomic.Uint64
	gsoBuffers, groBuffers         atomic.Uint64
	gsoFallbacks                   atomic.Uint64
	gsoShrinks, gsoLimit           atomic.Uint64
}

func (c *counters) snapshot() Stats {
	return Stats{
		PacketsSent:      c.packetsSent.Load(),
		BytesSent:        c.bytesSent.Load(),
		PacketsReceived:  c.packetsReceived.Load(),
		BytesReceived:    c.bytesReceived.Load(),
		NoBufs:           c.noBufs.Load(),
		WouldBlock:       c.wouldBlock.Load(),
		ICMPErrors:       c.icmpErrors.Load(),
		Truncated:        c.truncated.Load(),
		ControlTruncated: c.controlTruncated.Load(),
		RecvOverflows:    c.recvOverflows.Load(),
		Unroutable:       c.unroutable.Load(),
		GSOBuffers:       c.gsoBuffers.Load(),
		GROBuffers:       c.groBuffers.Load(),
		GSOFallbacks:     c.gsoFallbacks.Load(),
		GSOShrinks:       c.gsoShrinks.Load(),
		GSOLimit:         c.gsoLimit.Load(),
	}
}

// batchSize applies the default and the limits to a requested batch size.
func batchSize(n int) int {
	switch {
	case n <= 0:
		return DefaultBatchSize
	case n > MaxBatchSize:
		return MaxBatchSize
	}
	return n
}

// Check the interface at compile time.
var (
	_ Conn = (*UDPConn)(nil)
	_ Conn = (*PipeConn)(nil)
)
