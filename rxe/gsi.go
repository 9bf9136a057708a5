package rxe

import (
	"encoding/binary"
	"hash/fnv"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe/cm"
)

// gsi is the device's QP1, the General Services Interface (IBA 13.5): it
// receives and sends the MADs of the communication manager as UD
// SEND_ONLY packets with the GSI Q_Key, on the device's own UDP port, and
// drives the sans-IO CM agent (package rxe/cm) with the device's clock and
// one timer. A device creates it on first use (a MAD arriving, Dial,
// ListenCM).
type gsi struct {
	d *Device
	// psn and buf belong to the goroutine that writes the pending MADs
	// (flushing), one at a time, which writes them without mu.
	psn   packet.PSN
	buf   []byte
	mu    sync.Mutex // protects everything below
	agent *cm.Agent
	timer *time.Timer
	at    time.Time // the timer's deadline, zero when stopped
	// waiters get the events of the connections Dial and Accept drive;
	// listeners the REQs of their service IDs.
	waiters   map[cm.ID]chan cm.Event
	listeners map[uint64]*CMListener
	// udListeners get the SIDR requests of their service IDs (cmud.go).
	udListeners map[uint64]*UDListener
	counters    gsiCounters
	// fromCounts count the MADs taken from chosen addresses (CountMADs).
	fromCounts []*MADCount
	down       bool // the device closed: no MAD is taken or sent, no connection made

	// backlog names the listener whose backlog holds each REQ queued
	// for an Accept, until an Accept takes it or its peer withdraws it.
	backlog map[cm.ID]*CMListener

	// pending holds the MADs taken from the agent, in the agent's order,
	// until the one goroutine that writes them (flushing) does so without
	// mu: a write that blocks (a netdev waiting for room) holds up no
	// Dial, Accept, Disconnect, received MAD or Close. flushed closes
	// when that goroutine is done.
	pending  []cm.Out
	flushing bool
	flushed  chan struct{}
}

// gsiCounters count QP1 traffic.
type gsiCounters struct {
	rcvd, sent, badQKey, malformed, sendErr uint64
}

// caGUID returns the CA GUID of a device on addr and port. It names the
// node to a passive CM, which keys duplicate and stale REQs on it (IBA
// 12.9.8.4, cm_match_req): a hash of the whole address and the port, so
// that hosts whose IPv6 addresses share their low 64 bits (::5 in two
// subnets) differ, deterministic so that a restarted device keeps it, with
// the locally administered bit set.
func caGUID(addr netip.Addr, port uint16) uint64 {
	h := fnv.New64a()
	a := addr.As16()
	h.Write(a[:])
	h.Write(binary.BigEndian.AppendUint16(nil, port))
	return h.Sum64() | 0x0200_0000_0000_0000
}

// gsiOf returns the device's GSI, creating it on first use.
func (d *Device) gsiOf() *gsi {
	d.gsiOnce.Do(func() {
		guid := caGUID(d.addr, d.port)
		g := &gsi{d: d, buf: make([]byte, maxPacket), waiters: map[cm.ID]chan cm.Event{},
			listeners: map[uint64]*CMListener{}, backlog: map[cm.ID]*CMListener{}, psn: packet.PSN(rand.Uint32() & packet.PSNMask)}
		g.agent = cm.NewAgent(cm.Config{CAGUID: guid, TIDHigh: rand.Uint32(), PacketLifeTime: gsiPacketLifeTime,
			NextCommID: rand.Uint32})
		d.gsi.Store(g)
		if d.closed.Load() {
			// Close ran before d.gsi was set and saw no GSI to shut
			// down (Close sets closed, then loads d.gsi). Close may also
			// have seen it, hence the lock.
			g.mu.Lock()
			g.down = true
			g.mu.Unlock()
		}
	})
	return d.gsi.Load()
}

// gsiPacketLifeTime is the packet life time exponent the device assumes
// for every path (4.096 µs · 2^12 ≈ 17 ms): RoCE has no subnet manager to
// ask. Kernel rdma_cm assumes more for RoCE paths (cma.c
// CMA_IBOE_PACKET_LIFETIME: 18, about 1.07 s, in older kernels, 16, about
// 268 ms, in newer ones), so gorxe resends a lost CM message sooner than
// the kernel would; the value is not sent on the wire.
const gsiPacketLifeTime = 12

// receiveGSI handles a packet for QP1 (caller: the device's receive loop).
func (d *Device) receiveGSI(now time.Time, p packet.Packet, src netip.AddrPort) {
	g := d.gsiOf()
	g.mu.Lock()
	defer g.unlock()
	switch {
	case g.down:
	case p.Opcode() != packet.UDSendOnly || len(p.Payload()) < packet.MADSize:
		g.counters.malformed++
	case p.DETH().QKey() != packet.GSIQKey:
		g.counters.badQKey++ // IBA 13.5.3.3: QP1 accepts only the GSI Q_Key
	default:
		g.counters.rcvd++
		from := src.Addr().Unmap()
		for _, c := range g.fromCounts {
			if c.from == from {
				c.n++
			}
		}
		g.agent.Receive(now, from, p.Payload()[:packet.MADSize])
		g.step(now)
	}
}

// step hands the agent's events out, takes what the agent queued to send
// (written by unlock, after mu) and re-arms the timer (caller holds mu).
// The events go first: handing one out can queue a MAD (dispatch answers
// a REQ that no listener can take with a REJ), which is then sent with the
// others, not at the next MAD or timer.
func (g *gsi) step(now time.Time) {
	for {
		e, ok := g.agent.NextEvent()
		if !ok {
			break
		}
		g.dispatch(e)
	}
	g.takeOut()
	dl, ok := g.agent.Deadline()
	switch {
	case !ok:
		if g.timer != nil {
			g.timer.Stop()
		}
		g.at = time.Time{}
	case !dl.Equal(g.at):
		g.at = dl
		if g.timer == nil {
			g.timer = time.AfterFunc(dl.Sub(now), g.fire)
		} else {
			g.timer.Reset(dl.Sub(now))
		}
	}
}

// shutdown is Device.Close's part: every connection ends, its peer told
// as kernel ib_cm tells it when a device goes away (cm.Agent.Shutdown), and
// the timer stops. Dial, Accept and Disconnect callers see ErrClosed.
// The MADs are written on a goroutine of their own, behind any still
// being written, and shutdown waits for them at most closeWriteWait: a
// write blocked for good (a full pipe nobody reads) is then ended by
// Close's closing of the netdev.
func (g *gsi) shutdown() {
	g.mu.Lock()
	g.down = true
	g.agent.Shutdown(time.Now())
	g.takeOut()
	if g.timer != nil {
		g.timer.Stop()
	}
	g.at = time.Time{}
	if len(g.pending) > 0 && !g.flushing {
		g.flushing = true
		g.flushed = make(chan struct{})
		go g.flush()
	}
	busy, flushed := g.flushing, g.flushed
	g.mu.Unlock()
	if busy {
		t := time.NewTimer(closeWriteWait)
		defer t.Stop()
		select {
		case <-flushed:
		case <-t.C:
		}
	}
}

// takeOut moves the MADs the agent queued to pending (caller holds mu).
func (g *gsi) takeOut() {
	for {
		o, ok := g.agent.Poll()
		if !ok {
			return
		}
		g.pending = append(g.pending, o)
	}
}

// unlock releases mu and then writes the pending MADs, unless another
// goroutine is writing them already (it then writes these too, after
// those it has, so that every connection's MADs keep their order).
func (g *gsi) unlock() {
	write := len(g.pending) > 0 && !g.flushing
	if write {
		g.flushing = true
		g.flushed = make(chan struct{})
	}
	g.mu.Unlock()
	if write {
		g.flush()
	}
}

// flush writes the pending MADs in order, without mu, until none is left
// (caller: the goroutine that set flushing).
func (g *gsi) flush() {
	var sent, failed uint64
	for {
		g.mu.Lock()
		g.counters.sent += sent
		g.counters.sendErr += failed
		out := g.pending
		g.pending = nil
		if len(out) == 0 {
			g.flushing = false
			close(g.flushed)
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
		sent, failed = 0, 0
		for i := range out {
			if g.send(&out[i]) {
				sent++
			} else {
				failed++
			}
		}
	}
}

// fire runs the agent's timers.
func (g *gsi) fire() {
	if g.d.closed.Load() {
		return
	}
	g.mu.Lock()
	defer g.unlock()
	now := time.Now()
	g.at = time.Time{}
	g.agent.Tick(now)
	g.step(now)
}

// dispatch routes an agent event to whoever waits for it: a REQ to the
// listener of its service ID, a SIDR request to the UD listener of its
// (dispatchSIDR), anything else to the connection's waiter.
// An event nobody waits for is dropped (its connection was abandoned).
func (g *gsi) dispatch(e cm.Event) {
	if e.Kind == cm.EventSIDRREQ {
		g.dispatchSIDR(e)
		return
	}
	if e.Kind == cm.EventREQ {
		l := g.listeners[e.REQ.ServiceID]
		if l == nil {
			_ = g.agent.Reject(e.ID, packet.RejInvalidServiceID, nil) // ErrUnknownID or ErrState: the connection already ended, nothing to answer
			return
		}
		if !rdmaCMRequest(e.REQ, l.d.addr) {
			// Kernel rdma_cm refuses such a REQ before its consumer sees it:
			// its handler (cma_ib_req_handler) fails with an error other
			// than -ENOMEM, and ib_cm rejects the REQ received for the
			// consumer (cm_process_work → cm_destroy_id).
			_ = g.agent.Reject(e.ID, packet.RejConsumerReject, nil) // ErrUnknownID or ErrState: the connection already ended, nothing to answer
			l.ctr.refused.Add(1)
			return
		}
		select {
		case l.reqs <- e:
			g.backlog[e.ID] = l
		default:
			// The backlog is full: the REQ is forgotten unanswered, as
			// kernel rdma_cm drops one beyond its listener's backlog
			// (ucma_connect_event_handler fails with -ENOMEM, and
			// cm_destroy_id rejects no REQ received on -ENOMEM). The
			// peer resends it on its CM response timeout, a new request
			// then, which a freed slot takes.
			_ = g.agent.Drop(e.ID) // ErrUnknownID or ErrState: the connection already ended, nothing to forget
			l.ctr.dropped.Add(1)
		}
		return
	}
	if l := g.backlog[e.ID]; l != nil && g.agent.State(e.ID) == cm.StateIdle {
		// The peer withdrew a REQ still queued (its REJ: its Dial gave
		// up or its REQ's retries ran out; kernel cm_rej_handler ends a
		// REQ received so): it leaves the backlog, freeing its slot, and
		// no Accept sets up a QP for it.
		delete(g.backlog, e.ID)
		if l.unqueue(e.ID) {
			l.ctr.withdrawn.Add(1)
		} // else an Accept has just taken it: agent.Accept finds it gone and counts it
		return
	}
	if ch := g.waiters[e.ID]; ch != nil {
		select {
		case ch <- e:
		default:
		}
	}
}

// rdmaCMRequest reports whether a REQ is one a listener of RDMA CM's TCP
// port space bound to addr can take, as kernel rdma_cm checks it
// (cma_ib_req_handler): an RC connection (cma_ib_check_req_qp_type) whose
// private data begins with a valid IP CM header (IBTA Annex A11.2.2.1;
// cma_save_ip_info refuses a CMA version other than 0, and an IP version
// neither 4 nor 6 matches no IP listener) naming addr as its destination,
// in addr's IP version (cma_match_private_data). Accept makes an RC QP
// from it and reads the active side's port from that header. (rdma_cm
// counts a loopback bind address as any, cma_any_addr; a gorxe device on
// a loopback address is a node of its own, so its address is checked too.
// Its other check, validate_net_dev's route back to the source through
// the receiving interface, has no gorxe counterpart.)
func rdmaCMRequest(req *packet.REQ, addr netip.Addr) bool {
	var ip packet.CMIPHeader
	return req.TransportServiceType == packet.CMTransportRC && ip.Decode(req.PrivateData[:]) == nil && ip.Dst == addr
}

// send writes one MAD as a UD SEND_ONLY from QP1 to QP1 of o.To, with the
// GSI Q_Key, the default P_Key and AckReq set, on the
// device's UDP port (CM peers are assumed to listen on the same port as
// this device: 4791 in RoCE), and reports whether the netdev took it
// (caller: flush, without mu).
func (g *gsi) send(o *cm.Out) bool {
	d := g.d
	h := packet.Headers{
		BTH: packet.BTHFields{Opcode: packet.UDSendOnly, PKey: packet.DefaultPKey, DestQP: packet.GSIQPN, PSN: g.psn,
			AckReq: true}, // as kernel rxe's QP1 sends them (testdata/captures/kernel-rxe_rdmacm_send_4KiB.pcap)
		DETH: packet.DETHFields{QKey: packet.GSIQKey, SrcQP: packet.GSIQPN},
	}
	g.psn = g.psn.Next()
	ph := packet.PseudoHeader{Src: d.addr, Dst: o.To, SrcPort: d.port, DstPort: d.port}
	if ph.Is4() {
		ph.IPFlags = packet.IPv4FlagDF
	}
	n, err := packet.Build(g.buf, &h, o.MAD[:], &ph)
	if err != nil {
		return false
	}
	msg := []netdev.Message{{Buf: g.buf, N: n, Addr: netip.AddrPortFrom(o.To, d.port), Local: d.addr}}
	// The MAD is written without vector 0's txMu: netdev.Conn's
	// WriteBatch is safe for concurrent use, and a MAD keeps no order
	// with a vector's batch. Taking txMu here deadlocked: a step holds
	// its vector's txMu when its requester deadline reads the socket
	// (QP.readBeforeTimeout), and a REQ it reads there is answered from
	// receiveGSI on that same goroutine.
	_, err = d.vecs[0].conn.WriteBatch(msg)
	return err == nil
}

// wait registers a waiter for connection id's events (caller holds mu).
func (g *gsi) wait(id cm.ID) chan cm.Event {
	ch := make(chan cm.Event, 8)
	g.waiters[id] = ch
	return ch
}

// GSICounters count the device's QP1 traffic and its connection manager's
// work.
type GSICounters struct {
	RcvdMADs, SentMADs uint64 // CM MADs received and sent on QP1
	BadQKey            uint64 // QP1 packets with a Q_Key other than the GSI's, dropped
	Malformed          uint64 // QP1 packets that are not a UD SEND_ONLY of a whole MAD, dropped
	SendErrors         uint64 // MADs the netdev refused
	CM                 cm.Counters
}

// MADCount counts the CM MADs a device's QP1 takes from one IP address
// (Device.CountMADs).
type MADCount struct {
	g    *gsi
	from netip.Addr
	n    uint64 // under g.mu
}

// CountMADs starts counting the CM MADs the device's QP1 takes (those
// GSICounters.RcvdMADs counts) from the IP address from, from any UDP
// port, so that a wait for one peer's connection manager can tell its
// MADs from other hosts'. Stop ends the count.
func (d *Device) CountMADs(from netip.Addr) *MADCount {
	g := d.gsiOf()
	c := &MADCount{g: g, from: from.Unmap()}
	g.mu.Lock()
	g.fromCounts = append(g.fromCounts, c)
	g.mu.Unlock()
	return c
}

// Load returns the MADs counted so far.
func (c *MADCount) Load() uint64 {
	c.g.mu.Lock()
	defer c.g.mu.Unlock()
	return c.n
}

// Stop ends the count; Load keeps returning its last value.
func (c *MADCount) Stop() {
	g := c.g
	g.mu.Lock()
	defer g.mu.Unlock()
	g.fromCounts = slices.DeleteFunc(g.fromCounts, func(o *MADCount) bool { return o == c })
}

// GSICounters returns a snapshot of the QP1 counters (all zero until QP1
// is first used).
func (d *Device) GSICounters() GSICounters {
	g := d.gsiOf()
	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.counters
	return GSICounters{RcvdMADs: c.rcvd, SentMADs: c.sent, BadQKey: c.badQKey, Malformed: c.malformed,
		SendErrors: c.sendErr, CM: g.agent.Counters()}
}
