package rxe

import (
	"fmt"
	"net/netip"
	"runtime"
)

// Options configures a Device. The zero value is a good default.
type Options struct {
	// Name names the device (as ibv_devices lists it); default "rxe0".
	Name string
	// Addr is the device's IP address: its GID and the source address of
	// everything it sends. Default: the netdev's bound address, which must
	// then not be a wildcard.
	Addr netip.Addr
	// LinkMTU is the MTU of the link under the device; the port's active
	// MTU is derived from it as rxe does (LinkMTU minus 80 bytes of
	// headers, rounded down to an IB MTU, at most 4096). Default: the MTU
	// of the interface holding Addr, or 1500 if none does.
	LinkMTU int
	// StrictICRC drops every received IPv4 packet whose ICRC does not
	// verify with IP ID 0 and DF, instead of recovering the peer's IP ID
	// (see docs/icrc.md).
	StrictICRC bool
	// Credits turns on end-to-end credits (IBA 9.7.7.2.5): responders
	// advertise their receive queue depth and requesters honour the
	// peer's. Off, the device behaves like kernel rxe (always unlimited).
	Credits bool
	// CompVectors is the number of completion vectors (seed 001); default
	// runtime.GOMAXPROCS(0). Each vector has its own run queue and
	// transmit goroutine, and (with Listen, or OpenConns with one conn per
	// vector) its own socket and receive goroutine; it serves the QPs
	// whose receive CQ is bound to it. See docs/threading.md.
	CompVectors int
	// PinVectors locks each vector's goroutines to OS threads pinned to
	// one CPU each (vector i on the i-th CPU the process may use, modulo
	// their number), as IRQ affinity pins a NIC's completion vectors.
	PinVectors bool
	// SingleSocket makes Listen open one socket, read by one receive
	// goroutine for all vectors, instead of one socket per vector in a
	// SO_REUSEPORT group steered by QPN (netdev.ListenUDPGroup).
	SingleSocket bool
	// OwnConn makes Close close the netdev too (Listen sets it).
	OwnConn bool
	// NoInlineSend keeps every write on the transmit goroutine. By
	// default the receive goroutine, after a batch, writes the packets the
	// batch made ready (ACKs, read responses, requests that ACKs let out)
	// itself whenever the transmit goroutine is idle, instead of waking it
	// (see routineReceive). Set it for a netdev.Conn whose WriteBatch waits
	// for the peer to read (netdev.PipeOptions.BlockWhenFull): two devices
	// whose receive goroutines both waited to write to each other would
	// deadlock. UDP sockets never wait for the peer.
	NoInlineSend bool
	// LocalDropMode chooses what the device does with a datagram the local
	// host refuses (netdev.ErrLocalDrop: ENOBUFS from a full qdisc, EAGAIN
	// from a full socket buffer). The default, LocalDropAdaptive, hands it
	// back to its QP, which sends it again after its own adaptive delay.
	LocalDropMode LocalDropMode
	// Recovery tunes loss recovery in round trips (RTT estimate, recovery
	// timer and tail-loss probe, adaptive window); the zero value is on.
	Recovery RecoveryConfig
	// RecvBuffer is the socket receive buffer Listen asks for; 0 means
	// netdev.DefaultRecvBuffer (64 MiB). NoForceBuffers makes Listen ask
	// without SO_RCVBUFFORCE / SO_SNDBUFFORCE, as a process without
	// CAP_NET_ADMIN must (the kernel then caps at net.core.rmem_max).
	RecvBuffer     int
	NoForceBuffers bool
	// Warnf receives Listen's one warning about capped socket buffers
	// (Device.BufferCapWarning); nil means log.Printf.
	Warnf func(format string, args ...any)
}

// compVectors is CompVectors with its default, GOMAXPROCS.
func (o Options) compVectors() int {
	if o.CompVectors == 0 {
		return runtime.GOMAXPROCS(0)
	}
	return o.CompVectors
}

// LocalDropMode is what a device does with a datagram the local host
// refuses; see Options.LocalDropMode. Every mode counts the refusal
// (Counters.LocalDrops, QPCounters.LocalDrops).
type LocalDropMode uint8

// Local drop modes.
const (
	// LocalDropAdaptive (the default) treats a refusal as back-pressure,
	// not loss: the refused datagram and the later ones of the same QP in
	// the batch go back to that QP, which keeps them ahead of anything it
	// would build next and waits out the adaptive delay of its own
	// retry.Backoff (seed 002: OnDrop on a refusal, OnSent on every
	// datagram that leaves) on its vector's back-off timer, shared by the
	// vector's QPs. When the delay has passed the QP is scheduled and
	// its held datagrams are sent first. The transmit goroutine never
	// waits: it goes on with the other QPs of the batch at once. The
	// requester never sees the drop, so it causes no retransmission.
	LocalDropAdaptive LocalDropMode = iota
	// LocalDropTimeout discards the refused datagram, as kernel rxe does
	// since Linux 6.10: the requester's ACK timeout (or a later NAK
	// sequence error) recovers it with a go-back-N retransmission. The rest
	// of the batch is tried at once.
	LocalDropTimeout
	// LocalDropSpin retries the refused write at once, in a loop that
	// yields the processor (runtime.Gosched) between tries: the busy wait
	// of the seed 002 patch, kept for comparison only. It holds the
	// vector's transmit goroutine (every QP of the vector) while it spins and burns CPU; after
	// spinLimit tries it discards the datagram as LocalDropTimeout does.
	LocalDropSpin
)

// String returns "adaptive", "timeout" or "spin".
func (m LocalDropMode) String() string {
	switch m {
	case LocalDropAdaptive:
		return "adaptive"
	case LocalDropTimeout:
		return "timeout"
	case LocalDropSpin:
		return "spin"
	}
	return fmt.Sprintf("LocalDropMode(%d)", uint8(m))
}

// spinLimit bounds the tries of one refused write in LocalDropSpin mode.
const spinLimit = 1 << 14
