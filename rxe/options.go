package rxe

import (
	"fmt"
	"net/netip"
	"runtime"
	"time"
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
	// verify with DF and an IP ID below 64 (ID 0, or the ID the kernel
	// gives the k-th datagram of a UDP GSO send), instead of recovering
	// any peer IP ID (see docs/icrc.md).
	StrictICRC bool
	// NoGSO makes Listen's sockets send one datagram per packet and
	// receive one per read, instead of handing the kernel runs of equal-
	// size packets to one peer as one UDP GSO buffer (each packet keeping
	// its own headers and an ICRC for the IPv4 ID its datagram gets) and
	// receiving with UDP GRO. A capture on the sending host sees GSO
	// buffers unsegmented, and on the receiving host GRO-merged ones;
	// captures for Wireshark are best taken with NoGSO or on the wire.
	NoGSO bool
	// Credits turns on end-to-end credits (IBA 9.7.7.2.5): responders
	// advertise their receive queue depth and requesters honour the
	// peer's. Off, the device behaves like kernel rxe (always unlimited).
	Credits bool
	// CompVectors is the number of completion vectors; default
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
	// ReceiveSpin is how long a receive goroutine that has just handled a
	// batch keeps reading its socket without waiting (yielding its
	// processor between reads) before it blocks in the kernel's poller,
	// while the device's transport waits on its round trips: for 50 ms
	// after a sign of loss recovery (a NAK or selective-repeat hole report
	// sent or received, a request packet sent or received again, not an
	// RNR NAK's retry), for good on a device whose own receive buffer is
	// too small for rxe's 128-PSN window, and while a QP lives (until it
	// is reset or destroyed) whose peer's announced buffer is.
	// Every batch it reads restarts the time. A goroutine that blocks
	// leaves its processor idle; on a virtual machine an idle
	// processor takes tens of microseconds to wake for the next datagram,
	// and a busy Go process reads the network only from an idle processor
	// (or every 10 ms), so each round trip of a recovery or of a
	// buffer-bound window waited for wake-ups (docs/performance.md, "A
	// receive goroutine that spins before it blocks"). A loss-free stream
	// with room in its window keeps the processors busy; a spin there took
	// turns from the goroutines doing the work, so it does not spin.
	// Zero means DefaultReceiveSpin; a negative value turns the spin off.
	// It applies to netdevs that can be read from any goroutine
	// (netdev.SharedReader, as Listen opens); a device whose CQs are
	// busy-polled (CQ.BusyPoll) does not spin, since its caller reads the
	// socket itself. The cost is processor time: up to ReceiveSpin after
	// each batch, per receive goroutine.
	ReceiveSpin time.Duration
	// LocalDropMode chooses what the device does with a datagram the local
	// host refuses (netdev.ErrLocalDrop: ENOBUFS from a full qdisc, EAGAIN
	// from a full socket buffer). The default, LocalDropAdaptive, hands it
	// back to its QP, which sends it again after its own adaptive delay.
	LocalDropMode LocalDropMode
	// Trace, if not nil, receives the events of every QP: packets built
	// and received, the engines' state passes, timers armed and fired,
	// retries with their cause, completions and QP state changes (see
	// TraceEvent; NewTraceWriter writes them as JSON lines). It is called
	// with the QP's lock held and must not call into the device. Nil
	// costs one check per event site.
	Trace func(TraceEvent)
	// Recovery tunes loss recovery in round trips (RTT estimate, recovery
	// timer and tail-loss probe, adaptive window); the zero value is on.
	Recovery RecoveryConfig
	// RecvBuffer is the socket receive buffer Listen asks for; 0 means
	// netdev.DefaultRecvBuffer (64 MiB). NoForceBuffers makes Listen ask
	// without SO_RCVBUFFORCE / SO_SNDBUFFORCE, as a process without
	// CAP_NET_ADMIN must (the kernel then caps at net.core.rmem_max).
	RecvBuffer     int
	NoForceBuffers bool
	// TrafficClass is the IP traffic class byte (DSCP << 2 | ECN: the IPv4
	// TOS, the IPv6 Traffic Class) of every packet the device sends: RoCEv2
	// carries the GRH's traffic class there (IBTA Annex A17), and a
	// network that gives RoCE a lossless class (PFC or ECN by DSCP, as
	// NICs are often set up) finds RoCE by it. Zero leaves the kernel's
	// default, zero. The ICRC covers the field as ones, so any value keeps
	// the packets valid. It applies to the sockets Listen opens
	// (SocketOptions), for the device's packets whose QP sets no class
	// of its own: an RC or UC QP whose address vector has a TrafficClass,
	// or a UD work request whose address handle has one, sends with that
	// (AH). Dial's REQ carries it in its path, as rdma_cm
	// carries an id's TOS, so a peer that takes its path from the REQ
	// (the kernel's CM, and Accept here) answers with it too.
	TrafficClass uint8
	// Warnf receives Listen's warning about capped socket buffers
	// (Device.BufferCapWarning), once for each device whose buffers were
	// capped; nil means log.Printf, once per process.
	Warnf func(format string, args ...any)
}

// compVectors is CompVectors with its default, GOMAXPROCS.
func (o Options) compVectors() int {
	if o.CompVectors == 0 {
		return runtime.GOMAXPROCS(0)
	}
	return o.CompVectors
}

// DefaultReceiveSpin is Options.ReceiveSpin's default.
const DefaultReceiveSpin = 100 * time.Microsecond

// receiveSpin is ReceiveSpin with its default; 0 means no spin.
func (o Options) receiveSpin() time.Duration {
	switch {
	case o.ReceiveSpin == 0:
		return DefaultReceiveSpin
	case o.ReceiveSpin < 0:
		return 0
	}
	return o.ReceiveSpin
}

// LocalDropMode is what a device does after a local drop: a datagram the
// local host refuses (netdev.ErrLocalDrop); see Options.LocalDropMode.
// Every mode counts the local drop (Counters.LocalDrops,
// QPCounters.LocalDrops).
type LocalDropMode uint8

// Local drop modes.
const (
	// LocalDropAdaptive (the default) treats a local drop as
	// back-pressure, not loss: the refused datagram and the later ones of
	// the same QP in the batch go back to that QP, which keeps them ahead
	// of anything it would build next for its local-drop back-off, the
	// adaptive delay of its own retry.Backoff (OnDrop on a local drop,
	// OnSent on every datagram that leaves), filed in its vector's timer
	// queue (timers.go). When the back-off has passed the QP's step sends
	// them first. The transmit goroutine never waits: it goes on with the
	// other QPs of the batch at once. The requester never sees the drop,
	// so it causes no retransmission.
	LocalDropAdaptive LocalDropMode = iota
	// LocalDropTimeout discards the refused datagram, as kernel rxe does
	// since Linux 6.10: the requester's ACK timeout (or a later NAK
	// sequence error) recovers it with a go-back-N retransmission. The rest
	// of the batch is tried at once.
	LocalDropTimeout
	// LocalDropSpin retries the refused write at once, in a loop that
	// yields the processor (runtime.Gosched) between tries: a busy wait,
	// for comparison only. It holds the vector's transmit goroutine (every
	// QP of the vector) while it spins and burns CPU; after spinLimit
	// tries it discards the datagram as LocalDropTimeout does.
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
