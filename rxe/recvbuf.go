package rxe

import (
	"fmt"
	"log"
	"math/bits"
	"net/netip"
	"os"
	"strings"
	"sync"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/requester"
)

// bufferReporter is the optional capability of a netdev.Conn that reports
// the socket buffers the kernel granted (netdev.UDPConn has it).
type bufferReporter interface {
	BufferSizes() netdev.BufferSizes
}

// SocketBuffers returns the socket buffers of the device's netdevs: the
// smallest receive and send buffers over its sockets, whether any was
// capped, and ok false if no netdev reports its buffers (a pipe, or a
// decorator that hides them).
func (d *Device) SocketBuffers() (b netdev.BufferSizes, ok bool) {
	for _, c := range d.conns {
		r, is := c.(bufferReporter)
		if !is {
			continue
		}
		s := r.BufferSizes()
		if !ok {
			b, ok = s, true
			continue
		}
		b.Recv, b.Send = min(b.Recv, s.Recv), min(b.Send, s.Send)
		b.RecvForced, b.SendForced = b.RecvForced && s.RecvForced, b.SendForced && s.SendForced
		b.RecvAsked, b.SendAsked = max(b.RecvAsked, s.RecvAsked), max(b.SendAsked, s.SendAsked)
	}
	return b, ok
}

// BufferCapWarning returns a one-paragraph warning if the kernel granted
// the device's sockets less buffer than was asked for, naming the sysctl
// (net.core.rmem_max / wmem_max) and the capability (CAP_NET_ADMIN, for
// SO_RCVBUFFORCE) that lift the cap; "" if nothing was capped. The peer
// learns the buffer actually granted (ConnInfo.RecvBuffer) and keeps its
// bytes in flight within it, so a capped buffer costs throughput, not
// loss.
func (d *Device) BufferCapWarning() string {
	b, ok := d.SocketBuffers()
	if !ok {
		return ""
	}
	return CapWarning(d.opts.Name, b)
}

// CapWarning returns the warning BufferCapWarning gives for the socket
// buffers b of the device named name, for a program (rxectl) that opens
// its sockets itself; "" if nothing was capped.
func CapWarning(name string, b netdev.BufferSizes) string {
	if !b.RecvCapped() && !b.SendCapped() {
		return ""
	}
	var parts []string
	if b.RecvCapped() {
		parts = append(parts, fmt.Sprintf("receive buffer %s of %s asked (net.core.rmem_max = %s)",
			kib(b.Recv/2), kib(b.RecvAsked), sysctl("rmem_max")))
	}
	if b.SendCapped() {
		parts = append(parts, fmt.Sprintf("send buffer %s of %s asked (net.core.wmem_max = %s)",
			kib(b.Send/2), kib(b.SendAsked), sysctl("wmem_max")))
	}
	return fmt.Sprintf("rxe: %s: the kernel capped the socket buffers: %s. Senders are paced to the smaller buffer, "+
		"which limits throughput; to lift the cap run `sysctl -w net.core.rmem_max=%d net.core.wmem_max=%d` "+
		"or give the process CAP_NET_ADMIN (SO_RCVBUFFORCE / SO_SNDBUFFORCE)",
		name, strings.Join(parts, ", "), max(b.RecvAsked, netdev.DefaultRecvBuffer), max(b.SendAsked, netdev.DefaultSendBuffer))
}

// kib formats a byte count in KiB or MiB.
func kib(n int) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d KiB", n>>10)
}

// sysctl reads /proc/sys/net/core/name, or "?".
func sysctl(name string) string {
	b, err := os.ReadFile("/proc/sys/net/core/" + name)
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(b))
}

// capWarnOnce makes Listen log its warning about capped buffers once per
// process when the caller gave no Options.Warnf.
var capWarnOnce sync.Once

// warnCapped writes BufferCapWarning, if there is one: to Options.Warnf
// each time (a caller that passes its own Warnf decides what to repeat),
// or else with log.Printf once per process, so that a program opening
// many devices logs it once.
func (d *Device) warnCapped() {
	w := d.BufferCapWarning()
	if w == "" {
		return
	}
	if d.opts.Warnf != nil {
		d.opts.Warnf("%s", w)
		return
	}
	capWarnOnce.Do(func() { log.Printf("%s", w) })
}

// recvBufferInfo returns what Info announces: the receive buffer granted
// to the device's smallest socket, in bytes as getsockopt reports it, and
// the number of receive sockets (completion vectors with a socket each);
// 0, 0 if the netdev does not report its buffers.
func (d *Device) recvBufferInfo() (bytes, sockets int) {
	b, ok := d.SocketBuffers()
	if !ok {
		return 0, 0
	}
	return b.Recv, len(d.conns)
}

// unwrapper is the optional capability of a decorating netdev.Conn
// (netdev/faults, netdev/pcapdump) that gives the Conn it wraps.
type unwrapper interface {
	Unwrap() netdev.Conn
}

// ownRecvBuffer returns the smallest receive buffer over the device's
// sockets, looking through decorators (unwrapper) to the socket under
// them, or 0 if none reports its buffer. bufferLimits divides it among
// the QPs on one socket: the socket's buffer is what it is whether a
// capture or fault injector sits on it. (Info's announcement,
// recvBufferInfo, stays what SocketBuffers sees.)
func (d *Device) ownRecvBuffer() int {
	own := 0
	for _, c := range d.conns {
		for {
			if r, ok := c.(bufferReporter); ok {
				if b := r.BufferSizes().Recv; b > 0 && (own == 0 || b < own) {
					own = b
				}
				break
			}
			u, ok := c.(unwrapper)
			if !ok {
				break
			}
			c = u.Unwrap()
		}
	}
	return own
}

// truesize estimates the kernel memory one received datagram of n bytes
// is charged against a socket receive buffer (skb->truesize): the data
// with headroom and struct skb_shared_info rounded up to the power of two
// kmalloc gives, plus struct sk_buff. Loopback and most drivers allocate
// so; a driver using page fragments charges less.
func truesize(n int) int {
	return 1<<bits.Len(uint(n+448-1)) + 256
}

// charge is how the receiving socket is charged for the datagrams of a
// path (windowFor).
type charge uint8

const (
	// chargeLinear: each datagram in a linear kernel buffer (truesize),
	// as a NIC driver or a plain socket's loopback send gives.
	chargeLinear charge = iota
	// chargePaged: each datagram in page fragments
	// (netdev.PagedTruesize), as netdev.UDPConn sends on the loopback
	// path.
	chargePaged
	// chargeRuns: runs of datagrams as single GSO buffers that the
	// receiving socket queues whole (netdev.RunTruesize for runs of
	// minRun), as netdev.UDPConn sends with GSO on the loopback path to
	// a UDP_GRO socket.
	chargeRuns
)

// minRun is the run length windowFor assumes for chargeRuns. A GSO run
// holds equal-size datagrams and may end with one shorter one
// (netdev.UDPConn.runLength): the packets of a SEND, the MIDDLE and LAST
// packets of a WRITE and the MIDDLE responses of a READ have one size,
// and even two-packet WRITEs (a FIRST carrying a RETH, then a shorter
// LAST) go out as runs of two. Runs of one are rare (one-packet messages
// each longer than the one before, or a transmit pass that ends after one
// datagram); a window full of them is charged at most the paged size, 66
// × (4192 + 832) bytes at 4 KiB for a stock 416 KiB buffer: within the
// whole buffer, though not within the three quarters that leave room for
// UDP's lazy release.
const minRun = 2

// announcedWindow is the largest PSN window toward a peer that announced
// its receive buffer (a gorxe peer) under selective repeat (bufferLimits),
// when both ends' buffers absorb it: twice rxe's 128
// (requester.DefaultWindow). On loopback a stream's round trip (170 µs of
// SRTT at 600 000 packets/s, ~100 packets) is close to 128 PSNs: with an
// ACK asked every half window, 256 moved loss-free 1 MiB WRITE and SEND
// streams 27-28 % faster, 64 KiB ones 4 %, READs 3-14 %, and 512 no more
// (docs/performance.md, "A window of 256 toward gorxe peers"); with the
// ACK asked every eighth (requester's ackPerWindow), 128 PSNs carry about
// 0.9 of what 256 do on 1 MiB WRITEs ("AckReq every eighth of the
// window"). After a loss the requester halves it, not below
// 128 (requester's initRecovery). Toward a peer that announces nothing,
// and under go-back-N, the window stays DefaultWindow, as rxe's.
const announcedWindow = 2 * requester.DefaultWindow

// windowFor returns the PSN window that keeps a burst of PMTU-sized
// packets within three quarters of a receive buffer of buf bytes (as
// getsockopt reports it), between requester's minimum useful window (8)
// and announcedWindow; 0 if buf is 0 (unknown: the default window). Each
// packet is charged as c says: truesize (linear), netdev.PagedTruesize
// (paged: the receiver on this host is charged the sender's buffer, half
// of a linear one at 4 KiB), or netdev.RunTruesize for runs of minRun
// (runs: a GSO run's overhead is charged once). The quarter left is what
// UDP frees lazily (udp_rmem_release holds back up to a quarter of the
// buffer while datagrams wait in its reader queue).
func windowFor(buf, pmtu int, c charge) int {
	if buf <= 0 {
		return 0
	}
	n := pmtu + maxHeaderBytes
	per := truesize(n)
	switch c {
	case chargePaged:
		per = netdev.PagedTruesize(n)
	case chargeRuns:
		per = netdev.RunTruesize(n, minRun)
	}
	// buf*3/4 without the product: a peer's announcement is any int
	// (ConnInfo.RecvBuffer), and 3*buf overflows from 2^63/3 on.
	w := (buf/4*3 + buf%4*3/4) / per
	return min(max(w, 8), announcedWindow)
}

// pagedSender is the optional capability of a netdev.Conn that sends
// datagrams to some destinations in page fragments, and runs of them as
// GSO buffers (netdev.UDPConn has it).
type pagedSender interface {
	PagesTo(dst netip.Addr) bool
	RunsTo(dst netip.Addr) bool
	GRO() bool
}

// chargeTo returns how a socket on the path to dst is charged for what
// the device sends there, and for what a gorxe peer there sends back:
// chargeRuns if every netdev of the device sends GSO runs to dst and
// receives them whole (netdev.UDPConn.RunsTo and GRO; a peer on the
// loopback path shares this kernel and is taken to receive with UDP_GRO
// as this device does, which gorxe turns on by default), chargePaged if
// every netdev sends to dst paged (PagesTo: dst is on the loopback path),
// else chargeLinear.
func (d *Device) chargeTo(dst netip.Addr) charge {
	if len(d.conns) == 0 {
		return chargeLinear
	}
	c := chargeRuns
	for _, conn := range d.conns {
		p, ok := conn.(pagedSender)
		switch {
		case !ok || !p.PagesTo(dst):
			return chargeLinear
		case !p.RunsTo(dst) || !p.GRO():
			c = chargePaged
		}
	}
	return c
}

// maxHeaderBytes is what a RoCE datagram adds to its payload on the wire
// into a socket: IP, UDP, BTH, RETH, ICRC and pad, rounded up.
const maxHeaderBytes = 96

// peerBuffer is what the peer announced of its receive buffer
// (ConnInfo.RecvBuffer, or SetPeerReceiveBuffer); 0 means nothing.
type peerBuffer struct {
	recv    int
	sockets int
}

// SetPeerReceiveBuffer records the receive buffer (in bytes, as
// getsockopt reports it) and socket count a gorxe peer announced out of
// band: what the peer's device got for each of its receive sockets and
// how many it has (ConnInfo.RecvBuffer and RecvSockets; rxectl's
// gorxe-only exchange data), undivided. Before RTS only; Connect calls
// it, and a move to RESET forgets it (it was that connection's peer's).
// With it, the requester keeps its PSN window within this QP's share of
// the peer's socket and of its own device's, and asks long READs in parts
// that fit that window (bufferLimits). The device divides each socket's
// buffer among its QPs in RTS or SQD whose packets reach that socket
// (bufShares): on the peer, those to the same address and port whose
// peer QPNs are equal modulo sockets (its reuseport group's steering;
// all of them when sockets is 0, unknown), and here, those received by
// the same socket of this device; as QPs connect and leave, the windows
// of the others already in RTS follow. Without a buffer (a peer that
// announced nothing) the wire is exactly as before.
func (qp *QP) SetPeerReceiveBuffer(bytes, sockets int) error {
	qp.mu.Lock()
	defer qp.mu.Unlock()
	if qp.dead() {
		return ErrClosed
	}
	if bytes < 0 || sockets < 0 {
		return fmt.Errorf("%w: peer receive buffer %d bytes, %d sockets", ErrInvalidArgument, bytes, sockets)
	}
	if qp.state == QPSRTS || qp.state == QPSSQD {
		return fmt.Errorf("%w: the peer's receive buffer is set before RTS", ErrInvalidState)
	}
	qp.peerBuf = peerBuffer{recv: bytes, sockets: sockets}
	return nil
}

// bufferLimits returns the requester's Window and MaxReadPkts for a path
// MTU of pmtu bytes: toward a peer that announced its receive buffer, the
// window that this QP's share of the peer's socket buffer and of its own
// device's absorbs and, when that is below requester.DefaultWindow, READ
// parts of half of it; zeros (the defaults: 128 PSNs, whole READs)
// otherwise. The share of a socket is its buffer divided by the QPs whose
// packets it receives (bufShares.counts, this QP included): the peer's
// announced buffer over the QPs on the same peer socket, and the
// device's smallest receive buffer over the QPs on this QP's own socket.
// The window exceeds rxe's 128 only under selective repeat, up to
// announcedWindow and what the peer's out-of-order buffer holds: a
// go-back-N sender resends what it has in flight behind a loss, and a
// larger window there made go-back-N READ streams with lost responses
// 13-28 % slower. Two parts fit the window, so the next part is asked for
// while the responses of the last one still arrive: a part of a whole
// window would leave the link idle for a round trip after every part (the
// window, which counts response PSNs, has room for the next request only
// once the last response is in).
//
// Packets count as Device.chargeTo says for the peer's address: in GSO
// runs or paged when the peer is on the loopback path. The peer's packets
// into our buffer (READ responses) count so too then: a peer that
// announces its buffer is a gorxe device, whose UDP sockets page what
// they send on the loopback path of the same kernel, in GSO runs when
// its GSO is on as ours is. The caller holds mu.
func (qp *QP) bufferLimits(pmtu int) (window, readPkts int) {
	if qp.peerBuf.recv <= 0 {
		return 0, 0
	}
	k, _ := qp.shareKey()
	peerQPs, ownQPs := qp.dev.shares.counts(qp, k)
	c := qp.dev.chargeTo(qp.dest.Addr())
	window = windowFor(max(qp.peerBuf.recv/peerQPs, 1), pmtu, c)
	if own := qp.dev.ownRecvBuffer(); own > 0 {
		window = min(window, windowFor(max(own/ownQPs, 1), pmtu, c))
	}
	limit := requester.DefaultWindow
	if sr := qp.selectiveRepeat(); sr.on {
		limit = max(limit, min(announcedWindow, packet.OOOPackets(sr.peerLimit, pmtu)))
	}
	window = min(window, limit)
	// While the window is below rxe's 128, it, not the processors, bounds
	// this QP's stream: its device's receive goroutines spin after their
	// batches (Device.wantSpin).
	qp.setWindowBound(window < requester.DefaultWindow)
	if window >= requester.DefaultWindow {
		return window, 0 // READs whole, as toward any peer with a buffer this large
	}
	return window, max(window/2, 1)
}

// setWindowBound records whether a receive buffer bounds the QP's window
// below rxe's 128 (bufferLimits), counting the QP in its device's spinQPs
// while it does; the QP's requester going (reset, Destroy) clears it. The
// QP's lock is held.
func (qp *QP) setWindowBound(b bool) {
	if qp.windowBound == b {
		return
	}
	qp.windowBound = b
	if b {
		qp.dev.spinQPs.Add(1)
	} else {
		qp.dev.spinQPs.Add(-1)
	}
}
