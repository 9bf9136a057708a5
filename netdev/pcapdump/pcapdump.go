// Package pcapdump records the datagrams of a netdev.Conn in a pcap file:
// a decorator that writes every datagram the Conn sends and receives as an
// Ethernet frame with synthesized IPv4 or IPv6 and UDP headers, so that
// Wireshark, tshark and rxectl dump decode it as the network carried it,
// with a valid ICRC.
//
// The RoCEv2 ICRC (IBA A17.4.4) covers the IPv4 Identification and flags,
// which a UDP socket neither chooses nor sees. The headers written are those
// a gorxe socket sends (package netdev: ID 0, DF, TTL 64, or ID k below 64
// for the k-th datagram of a UDP GSO send, which is recovered). A peer may
// send other IDs (kernel rxe sends non-zero ones): for each received IPv4
// datagram the one ID that makes its ICRC match is recovered
// (packet.PseudoHeader.RecoverIPv4ID) and written, with DF or, failing
// that, without it, so those check too. A received datagram that no ID
// explains (corrupted on the way, or not RoCE) is written with ID 0 and DF,
// shows a bad ICRC, and is counted in Stats.BadICRC. The traffic class and
// TTL of a received datagram are those its Conn reported (see
// Options.SentTOS), which the ICRC does not cover.
//
// Addresses: the local side of a datagram is Message.Local when it is set
// and not unspecified, else Options.LocalAddr, else the inner Conn's
// LocalAddr; the local port is always the inner Conn's. The remote side is
// Message.Addr. The Ethernet addresses are fixed locally administered
// ones, LocalMAC and PeerMAC.
package pcapdump

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/packet"
)

// The Ethernet addresses written: locally administered (bit 1 of the first
// byte), unicast.
var (
	LocalMAC = [6]byte{0x02, 0x00, 0x00, 0x00, 0x00, 0x01} // this Conn's side
	PeerMAC  = [6]byte{0x02, 0x00, 0x00, 0x00, 0x00, 0x02} // the other side
)

// Snaplen is the snapshot length in the file header; records are never
// truncated.
const Snaplen = 262144

// Header values of the synthesized frames.
const (
	ethHeaderSize = 14
	ttl           = 64 // Linux's default TTL and hop limit
	maxUDPPayload = 65535 - packet.IPv4HeaderSize - packet.UDPHeaderSize
	bufferSize    = 64 << 10
	// maxHeldBytes bounds the memory of the reads held for a write in
	// progress (sink.writing): their payload and heldOverhead each.
	maxHeldBytes = 1 << 20
	heldOverhead = 64
)

// Options configures Wrap. The zero value is the default.
type Options struct {
	// LocalAddr is the local address written when a Message does not
	// give one (Message.Local unset or unspecified); zero means the inner
	// Conn's LocalAddr. Set it when the inner Conn is bound to a wildcard
	// address and its callers leave Message.Local unset on write.
	LocalAddr netip.Addr

	// FlushEachBatch writes the records of every batch through to the
	// io.Writer at once (one Write per batch), for a reader following
	// the file live. By default records are buffered (64 KiB) until
	// Flush, Close or a full buffer.
	FlushEachBatch bool

	// SentTOS is the IP traffic class (IPv4 TOS, IPv6 Traffic Class)
	// written in the headers of the packets sent whose Message.TOS is 0:
	// the inner Conn's netdev.Options.TOS, which a wrapper cannot read
	// from the socket. The packets received are written with the traffic
	// class and TTL the inner Conn reports in their Message (after
	// ReportIPFields; a PipeConn always reports the traffic class), and
	// with traffic class 0 and TTL 64 where it reports none.
	SentTOS uint8
}

// Stats is a snapshot of a Conn's counters.
type Stats struct {
	Sent     uint64 // records written for datagrams that went out
	Received uint64 // records written for datagrams received
	// Skipped counts datagrams not recorded: after a write error or
	// Close, or with addresses of different families or none.
	Skipped uint64
	// BadICRC counts received datagrams whose ICRC no IP header explains
	// (written with IPv4 ID 0 and DF).
	BadICRC uint64
	// Recovered counts received IPv4 datagrams written with a recovered
	// IPv4 ID other than 0 or without DF.
	Recovered uint64
	// WriteErrors is 1 after a write to the io.Writer failed (capture
	// then stops; see Conn.Err), else 0.
	WriteErrors uint64
}

// Conn is a netdev.Conn that records in a pcap every datagram another
// Conn sends and receives. It is safe for the same concurrent use as
// netdev.Conn: records of concurrent ReadBatch and WriteBatch calls are
// written whole, one after the other. Recording never makes ReadBatch
// wait for a WriteBatch, so a Conn whose writes wait for the peer to read
// (netdev.PipeOptions.BlockWhenFull) keeps its traffic flowing both ways.
//
// A sent datagram's record is stamped when its WriteBatch handed it to
// the inner Conn (the start of the write), a received one's when its
// ReadBatch returned; a record that waited for the capture's lock behind
// a later-stamped one takes that one's time, so timestamps never go back
// in the file. A round trip read off the capture (a request's record to
// its answer's) is then no shorter than the real one: an answer read
// while the request's write was still in its system call keeps the time
// it was read, not the time the write returned.
type Conn struct {
	inner netdev.Conn
	local netip.AddrPort // the inner Conn's, with Options.LocalAddr applied
	*sink
	closed bool // guarded by sink.mu
}

// sink is the capture file and what goes with it, shared by the Conns
// recording into one file (Conn.Share).
type sink struct {
	flush bool
	tos   uint8 // Options.SentTOS

	// order serialises WriteBatch calls, each with its records.
	order sync.Mutex

	mu      sync.Mutex // everything below
	bw      *bufio.Writer
	pw      *pcapgo.Writer
	frame   []byte
	err     error // first write error: capture stopped
	stopped bool  // after a write error or Close
	open    int   // the Conns recording here not closed yet

	// The file is in causal order: a ReadBatch that returns while a
	// WriteBatch is in its write (writing) does not record its datagrams
	// but holds copies of them in held, and the WriteBatch records them
	// after its own, so that an answer read while the write that caused
	// it is still in its system call is written after that write's
	// records. The reader does not wait for the write: a write may wait
	// for the peer to read (a pipe with BlockWhenFull), and the peer's
	// reader for the peer's write, which waits for this Conn's reader.
	// Reads held beyond maxHeldBytes are recorded at once, before the
	// write's records.
	writing   bool
	held      []netdev.Message // held[:nheld] are pending; the rest keep buffers for reuse
	heldBy    []*Conn          // the Conn that read held[i]
	heldAt    []time.Time      // when held[i] was read
	nheld     int
	heldBytes int

	// last is the timestamp of the last record: a record stamped before
	// it (it waited for mu behind a later-stamped one) takes last, so the
	// file's timestamps never go back.
	last time.Time

	sent, received, skipped, badICRC, recovered, writeErrors atomic.Uint64
}

var _ netdev.Conn = (*Conn)(nil)

// Wrap writes a pcap file header (nanosecond timestamps, link type
// Ethernet) to w and returns a Conn that sends and receives through inner
// and records every datagram in w. It returns an error only if the header
// cannot be written. The Conn owns inner (Close closes it) but not w.
func Wrap(inner netdev.Conn, w io.Writer, opts Options) (*Conn, error) {
	local := inner.LocalAddr()
	if opts.LocalAddr.IsValid() {
		local = netip.AddrPortFrom(opts.LocalAddr, local.Port())
	}
	c := &Conn{inner: inner, local: local, sink: &sink{
		flush: opts.FlushEachBatch, open: 1, tos: opts.SentTOS,
		bw:    bufio.NewWriterSize(w, bufferSize),
		frame: make([]byte, ethHeaderSize+packet.IPv6HeaderSize+packet.UDPHeaderSize+maxUDPPayload),
	}}
	c.pw = pcapgo.NewWriterNanos(c.bw)
	if err := c.pw.WriteFileHeader(Snaplen, layers.LinkTypeEthernet); err != nil {
		return nil, fmt.Errorf("pcapdump: %w", err)
	}
	if err := c.bw.Flush(); err != nil {
		return nil, fmt.Errorf("pcapdump: %w", err)
	}
	return c, nil
}

// ReadBatch implements netdev.Conn and records the datagrams received,
// after the records of any write in progress: while a WriteBatch is in its
// write, ReadBatch leaves copies of them to it (see sink.writing) and
// returns without waiting.
func (c *Conn) ReadBatch(msgs []netdev.Message) (int, error) {
	n, err := c.inner.ReadBatch(msgs)
	if n > 0 {
		at := time.Now()
		c.mu.Lock()
		if !c.hold(msgs[:n], at) {
			c.recordHeld()
			c.record(msgs[:n], false, at)
		}
		c.mu.Unlock()
	}
	return n, err
}

// WriteBatch implements netdev.Conn and records the datagrams that went
// out (msgs[:n]), after they did and before any datagram read meanwhile.
// Concurrent WriteBatch calls are serialised while capturing.
func (c *Conn) WriteBatch(msgs []netdev.Message) (int, error) {
	c.order.Lock()
	defer c.order.Unlock()
	c.mu.Lock()
	c.writing = true
	at := time.Now() // the datagrams are the kernel's from here on
	c.mu.Unlock()
	n, err := c.inner.WriteBatch(msgs)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writing = false
	if n > 0 {
		c.record(msgs[:n], true, at)
	}
	c.recordHeld()
	return n, err
}

// hold keeps copies of msgs, read at time at, for the write in progress
// to record, and reports whether it did: not when no write is in
// progress, the capture has stopped or the held reads would pass
// maxHeldBytes (caller holds mu).
func (c *Conn) hold(msgs []netdev.Message, at time.Time) bool {
	if !c.writing || c.stopped {
		return false
	}
	size := 0
	for i := range msgs {
		size += msgs[i].N + heldOverhead
	}
	if c.heldBytes+size > maxHeldBytes {
		return false
	}
	c.heldBytes += size
	for i := range msgs {
		m := &msgs[i]
		if c.nheld == len(c.held) {
			c.held = append(c.held, netdev.Message{})
			c.heldBy = append(c.heldBy, nil)
			c.heldAt = append(c.heldAt, time.Time{})
		}
		h := &c.held[c.nheld]
		*h = netdev.Message{Buf: append(h.Buf[:0], m.Buf[:m.N]...), N: m.N, Addr: m.Addr, Local: m.Local, TOS: m.TOS, TTL: m.TTL}
		c.heldBy[c.nheld], c.heldAt[c.nheld] = c, at
		c.nheld++
	}
	return true
}

// recordHeld records the held reads, in the order read, and forgets them
// (caller holds mu).
func (c *Conn) recordHeld() {
	for i := 0; i < c.nheld; {
		by, at, j := c.heldBy[i], c.heldAt[i], i+1
		for j < c.nheld && c.heldBy[j] == by && c.heldAt[j].Equal(at) {
			j++
		}
		by.record(c.held[i:j], false, at)
		clear(c.heldBy[i:j])
		i = j
	}
	c.nheld, c.heldBytes = 0, 0
}

// BatchSize implements netdev.Conn: the inner Conn's.
func (c *Conn) BatchSize() int { return c.inner.BatchSize() }

// LocalAddr implements netdev.Conn: the inner Conn's.
func (c *Conn) LocalAddr() netip.AddrPort { return c.inner.LocalAddr() }

// Unwrap returns the inner Conn.
func (c *Conn) Unwrap() netdev.Conn { return c.inner }

// ReportIPFields implements netdev.IPFieldReporter: it asks the inner Conn.
func (c *Conn) ReportIPFields() error {
	if r, ok := c.inner.(netdev.IPFieldReporter); ok {
		return r.ReportIPFields()
	}
	return errors.ErrUnsupported
}

// Stats returns a snapshot of the counters.
func (c *Conn) Stats() Stats {
	return Stats{
		Sent: c.sent.Load(), Received: c.received.Load(), Skipped: c.skipped.Load(),
		BadICRC: c.badICRC.Load(), Recovered: c.recovered.Load(), WriteErrors: c.writeErrors.Load(),
	}
}

// Err returns the write error that stopped the capture, or nil.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Flush writes buffered records to the io.Writer. It returns the error
// that stopped the capture, if any.
func (c *Conn) Flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.stopped {
		c.fail(c.bw.Flush())
	}
	return c.err
}

// Close closes the inner Conn, then writes the buffered records to the
// io.Writer and, once every Conn sharing the file (Share) is closed, stops
// the capture; it does not close the io.Writer. It returns the inner
// Conn's error: a capture error is reported by Err (and never breaks
// traffic). Closing twice is harmless.
func (c *Conn) Close() error {
	err := c.inner.Close()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return err
	}
	c.closed = true
	c.open--
	if !c.stopped {
		c.fail(c.bw.Flush())
		c.stopped = c.open <= 0
	}
	return err
}

// Share returns a Conn that sends and receives through inner and records
// into c's file, after c's records and in causal order with them (the two
// share the lock that orders records, so their writes are serialised while
// capturing), for a device with several sockets (one per completion
// vector) whose traffic goes into one capture. The Conns share counters:
// Stats and Err of either cover both. The capture stops when all of them
// are closed.
func (c *Conn) Share(inner netdev.Conn) *Conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.open++
	return &Conn{inner: inner, local: netip.AddrPortFrom(c.local.Addr(), inner.LocalAddr().Port()), sink: c.sink}
}

// fail records the first write error and stops the capture.
func (c *Conn) fail(err error) {
	if err != nil && c.err == nil {
		c.err = fmt.Errorf("pcapdump: %w", err)
		c.writeErrors.Add(1)
		c.stopped = true
	}
}

// record writes one record per datagram, stamped at (or at the last
// record's time if that is later: sink.last) (caller holds mu).
func (c *Conn) record(msgs []netdev.Message, sent bool, at time.Time) {
	if c.stopped {
		c.skipped.Add(uint64(len(msgs)))
		return
	}
	if at.Before(c.last) {
		at = c.last
	}
	c.last = at
	for i := range msgs {
		m := &msgs[i]
		frame, ok := c.synthesize(m, sent)
		if !ok {
			c.skipped.Add(1)
			continue
		}
		ci := gopacket.CaptureInfo{Timestamp: at, CaptureLength: len(frame), Length: len(frame)}
		if err := c.pw.WritePacket(ci, frame); err != nil {
			c.fail(err)
			c.skipped.Add(uint64(len(msgs) - i))
			return
		}
		if sent {
			c.sent.Add(1)
		} else {
			c.received.Add(1)
		}
	}
	if c.flush {
		c.fail(c.bw.Flush())
	}
}

// synthesize builds the frame of m into c.frame.
func (c *Conn) synthesize(m *netdev.Message, sent bool) ([]byte, bool) {
	payload := m.Buf[:m.N]
	localAddr := m.Local.Unmap()
	if !localAddr.IsValid() || localAddr.IsUnspecified() {
		localAddr = c.local.Addr().Unmap()
	}
	local := netip.AddrPortFrom(localAddr, c.local.Port())
	peer := netip.AddrPortFrom(m.Addr.Addr().Unmap(), m.Addr.Port())
	if !local.Addr().IsValid() || !peer.Addr().IsValid() || local.Addr().Is4() != peer.Addr().Is4() ||
		len(payload) > maxUDPPayload {
		return nil, false
	}
	src, dst, srcMAC, dstMAC := local, peer, LocalMAC, PeerMAC
	if !sent {
		src, dst, srcMAC, dstMAC = peer, local, PeerMAC, LocalMAC
	}
	ph := packet.PseudoHeader{Src: src.Addr(), Dst: dst.Addr(), SrcPort: src.Port(), DstPort: dst.Port()}
	if ph.Is4() {
		ph.IPFlags = packet.IPv4FlagDF
		if sent {
			c.gsoID(&ph, payload)
		} else {
			c.recoverID(&ph, payload)
		}
	} else if !sent && ph.CheckICRC(payload) != nil {
		c.badICRC.Add(1)
	}

	// A received datagram's traffic class and TTL are those the inner
	// Conn reported (netdev.Message: 0 where it reports none); an
	// unreported TTL is written as Linux's default.
	tos, hops := m.TOS, uint8(ttl)
	if sent {
		tos = c.tos
		if m.TOS != 0 {
			tos = m.TOS // the message's own class, sent as a control message
		}
	} else if m.TTL != 0 {
		hops = m.TTL
	}
	f := c.frame
	copy(f[0:6], dstMAC[:])
	copy(f[6:12], srcMAC[:])
	ip := f[ethHeaderSize:]
	var ipLen int
	if ph.Is4() {
		binary.BigEndian.PutUint16(f[12:], uint16(layers.EthernetTypeIPv4))
		ipLen = packet.IPv4HeaderSize
		ip[0], ip[1] = 0x45, tos // version 4, 20-byte header
		binary.BigEndian.PutUint16(ip[2:], uint16(ipLen+packet.UDPHeaderSize+len(payload)))
		binary.BigEndian.PutUint16(ip[4:], ph.IPID)
		binary.BigEndian.PutUint16(ip[6:], ph.IPFlags)
		ip[8], ip[9] = hops, 17 // UDP
		ip[10], ip[11] = 0, 0
		s, d := ph.Src.As4(), ph.Dst.As4()
		copy(ip[12:16], s[:])
		copy(ip[16:20], d[:])
		binary.BigEndian.PutUint16(ip[10:], packet.IPv4HeaderChecksum(ip[:ipLen]))
	} else {
		binary.BigEndian.PutUint16(f[12:], uint16(layers.EthernetTypeIPv6))
		ipLen = packet.IPv6HeaderSize
		ip[0], ip[1], ip[2], ip[3] = 0x60|tos>>4, tos<<4, 0, 0 // version 6, traffic class; flow label 0
		binary.BigEndian.PutUint16(ip[4:], uint16(packet.UDPHeaderSize+len(payload)))
		ip[6], ip[7] = 17, hops
		s, d := ph.Src.As16(), ph.Dst.As16()
		copy(ip[8:24], s[:])
		copy(ip[24:40], d[:])
	}
	udp := ip[ipLen:]
	binary.BigEndian.PutUint16(udp[0:], src.Port())
	binary.BigEndian.PutUint16(udp[2:], dst.Port())
	binary.BigEndian.PutUint16(udp[4:], uint16(packet.UDPHeaderSize+len(payload)))
	udp[6], udp[7] = 0, 0
	n := copy(udp[packet.UDPHeaderSize:], payload)
	udp = udp[:packet.UDPHeaderSize+n]
	binary.BigEndian.PutUint16(udp[6:], packet.UDPChecksum(ip[:ipLen], udp))
	return f[:ethHeaderSize+ipLen+len(udp)], true
}

// recoverID sets ph's IPv4 ID and flags to those that make pkt's ICRC
// match: ID 0 with DF (what gorxe sends) if it does, else the recovered ID
// with DF, else without DF; else ID 0 with DF, counted as a bad ICRC.
func (c *Conn) recoverID(ph *packet.PseudoHeader, pkt []byte) {
	for _, flags := range [...]uint16{packet.IPv4FlagDF, 0} {
		ph.IPFlags = flags
		if id, ok := ph.RecoverIPv4ID(pkt); ok {
			ph.IPID = id
			if id != 0 || flags != packet.IPv4FlagDF {
				c.recovered.Add(1)
			}
			return
		}
	}
	ph.IPID, ph.IPFlags = 0, packet.IPv4FlagDF
	c.badICRC.Add(1)
}

// gsoID sets the IPv4 ID of a sent datagram: ID 0 (with DF), or k below 64
// when its ICRC was rewritten for the k-th datagram of a UDP GSO send
// (netdev.Options.RewriteIPv4ID). Sent datagrams are not counted.
func (c *Conn) gsoID(ph *packet.PseudoHeader, pkt []byte) {
	if id, ok := ph.RecoverIPv4ID(pkt); ok && id < 64 {
		ph.IPID = id
	}
}
