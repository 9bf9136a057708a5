package perftest

import (
	"errors"
	"fmt"
	"net/netip"
	"runtime"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/oob"
	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/netdev/faults"
	"github.com/gorxe/gorxe/rxe"
)

// openSockets opens the device's sockets on addr: one per completion
// vector (GOMAXPROCS of them, rxe's default), in a SO_REUSEPORT group
// whose kernel program steers each datagram to the socket of its
// destination QPN's vector (netdev.ListenUDPGroup, as rxe.Listen does), so
// the QPs of -q N, spread over the vectors, are received by as many
// receive goroutines. Each socket gets the capture and the fault
// injection (wrapConns). On error nothing stays open.
func (s *session) openSockets(addr netip.AddrPort) ([]netdev.Conn, error) {
	group, err := netdev.ListenUDPGroup(addr, runtime.GOMAXPROCS(0), s.socketOptions())
	if err != nil {
		hint := "is it a local address? (--bind)"
		if errors.Is(err, errAddrInUse) {
			hint = fmt.Sprintf("UDP port %d is taken, e.g. by the rdma_rxe kernel module or another rxectl", s.o.udpPort)
		}
		return nil, fmt.Errorf("open the RoCE device on %v: %w (%s)", addr, err, hint)
	}
	s.socks = group
	s.bufs = group[0].BufferSizes()
	if w := rxe.CapWarning(s.o.devName, s.bufs); w != "" {
		s.o.capWarn.say(s.errw, "rxectl: "+w)
	}
	conns := make([]netdev.Conn, len(group))
	for i, c := range group {
		conns[i] = c
	}
	return s.wrapConns(conns)
}

// socketOptions are the options of the device's sockets: rxe.Listen's
// (rxe.SocketOptions) with --gso, --tclass and --no-force-buffers.
func (s *session) socketOptions() netdev.Options {
	o := rxe.SocketOptions(rxe.Options{NoGSO: s.o.noGSO, TrafficClass: uint8(s.o.tclass)})
	o.NoForce = s.o.noForce
	if socketRecvBuffer != 0 {
		o.RecvBuffer = socketRecvBuffer
	}
	return o
}

// socketRecvBuffer is the receive buffer the device's sockets ask for
// (netdev.Options.RecvBuffer); 0 keeps rxe.SocketOptions's. Tests set it,
// with --no-force-buffers, to get the buffer a process without
// CAP_NET_ADMIN gets on a stock kernel (net.core.rmem_max 212992).
var socketRecvBuffer = 0

// peerBuffer returns the receive buffer and socket count the test QPs
// are given as their peer's (rxe.QP.SetPeerReceiveBuffer,
// rxe.CMOptions.PeerRecvBuffer and PeerRecvSockets), as the peer
// announced them; 0, 0 when it announced no buffer (perftest: the wire
// then as toward kernel rxe). rxe divides the buffer itself
// (docs/recovery.md, "Never overrun the receiver"): among the QPs whose
// peer QPNs fall on one peer socket (its reuseport group steers by
// destination QPN modulo the count, netdev.ListenUDPGroup), and its own
// socket's among the QPs it receives for. A count that saturated
// (oob.MaxRecvSockets: the modulus is unknown) is given as 0, which rxe
// takes as one socket for every QP toward the peer.
func (s *session) peerBuffer() (bytes, sockets int) {
	if s.peer.RecvBuffer <= 0 {
		return 0, 0
	}
	sockets = s.peer.RecvSockets
	if sockets >= oob.MaxRecvSockets {
		sockets = 0
	}
	return s.peer.RecvBuffer, sockets
}

// wrapConns stacks the capture and the fault injection on every socket
// (wrapConn): the sockets record into one capture file (pcapdump's
// Conn.Share) and each gets its own fault injector with the same rules and
// seed, deciding over the datagrams of its own vector's QPs (with -q 1,
// all of them); each draws from streams of its own (faults.Config.Stream:
// the socket's index), so the vectors' QPs do not lose the same packets
// together. On error it closes conns.
func (s *session) wrapConns(conns []netdev.Conn) ([]netdev.Conn, error) {
	first, err := s.wrapConn(conns[0])
	if err != nil {
		closeConns(conns[1:])
		return nil, err
	}
	out := []netdev.Conn{first}
	for i, c := range conns[1:] {
		if s.pconn != nil {
			c = s.pconn.Share(c)
		}
		if s.fconn != nil {
			fc := faults.Wrap(c, faults.Config{Seed: s.o.seed, Stream: uint64(i + 1), Rules: s.o.rules})
			s.fmore = append(s.fmore, fc)
			c = fc
		}
		out = append(out, c)
	}
	return out, nil
}

// faultStats sums the fault injectors' counts.
func (s *session) faultStats() faults.Stats {
	st := s.fconn.Stats()
	for _, fc := range s.fmore {
		o := fc.Stats()
		addDir(&st.Send, o.Send)
		addDir(&st.Recv, o.Recv)
	}
	return st
}

func addDir(d *faults.DirStats, o faults.DirStats) {
	d.Dropped += o.Dropped
	d.Duplicated += o.Duplicated
	d.Reordered += o.Reordered
	d.Delayed += o.Delayed
	d.Corrupted += o.Corrupted
	d.LocalDrops += o.LocalDrops
	d.Lost += o.Lost
}

// closeConns closes conns.
func closeConns(conns []netdev.Conn) {
	for _, c := range conns {
		c.Close()
	}
}
