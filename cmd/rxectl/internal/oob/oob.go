// Package oob speaks perftest's out-of-band exchange over TCP ("Ethernet"
// data exchange method, protocol reference §5.2): fixed-size messages
// without framing, the client writing first and the server reading first in
// every exchange (perftest_communication.c: ctx_xchg_data_ethernet,
// ctx_hand_shake).
package oob

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/report"
)

// Message sizes and constants of the exchange.
const (
	// VersionMsgSize is the size of the version message (perftest's
	// MAX_VERSION char array).
	VersionMsgSize = 16
	// KeyMsgSize is KEY_MSG_SIZE_GID: the key message with a GID, used
	// whenever a GID index is set, i.e. always on RoCE.
	KeyMsgSize = 108
	// MTUMsgSize is the MTU message size for peers of version >= 5.31.
	MTUMsgSize = 2
	// OurCycleBuffer and OurCacheLine are the system data we send: the
	// page size and the cache line size perftest reads from the system.
	OurCycleBuffer = 4096
	OurCacheLine   = 64
	// rxectlMarker follows the NUL of our version string, then our RoCE
	// UDP port (big-endian). perftest reads the version with atof, which
	// stops at the NUL, so the marker is invisible to it; two rxectl ends
	// use it to learn each other's UDP port (perftest always uses 4791).
	rxectlMarker = "rxectl"
)

// AdvertisedVersion is the perftest version we announce. perftest 6.28 and
// later exchange a raw binary parameter block (negotiate_params, with a
// build-dependent struct ibv_device_attr inside) when the *peer's* version
// is at least 6.28; below 5.70 they refuse to talk. "6.27" is the newest
// version that keeps every perftest from 5.70 up on the textual exchange.
const AdvertisedVersion = "6.27"

// MinPeerVersion is the oldest peer version whose exchange we speak:
// check_version_compatibility refuses older peers.
const MinPeerVersion = 5.70

// DoneMsg is what perftest before 6.28-ish writes after the last key
// exchange ("done" with its NUL), and rxectl's Finish too; newer perftest
// versions just close.
const DoneMsg = "done\x00"

var doneMsg = []byte(DoneMsg)

// KeyMsg is perftest's struct pingpong_dest as the key message carries it:
// "LID:OUT_READS:QPN:PSN:RKEY:VADDR:" then the 16 GID bytes "XX:" each,
// then "SRQN:", lowercase hex, sent with its NUL (KEY_PRINT_FMT_GID).
type KeyMsg struct {
	LID      uint16
	OutReads uint16
	QPN      uint32 // 24 bits
	PSN      uint32 // 24 bits
	RKey     uint32
	VAddr    uint64
	GID      [16]byte
	SRQN     uint32
}

// Marshal formats k as the 108-byte key message.
func (k KeyMsg) Marshal() []byte {
	var b strings.Builder
	b.Grow(KeyMsgSize)
	fmt.Fprintf(&b, "%04x:%04x:%06x:%06x:%08x:%016x:", k.LID, k.OutReads, k.QPN&0xFFFFFF, k.PSN&0xFFFFFF, k.RKey, k.VAddr)
	for _, x := range k.GID {
		fmt.Fprintf(&b, "%02x:", x)
	}
	fmt.Fprintf(&b, "%08x:", k.SRQN)
	b.WriteByte(0)
	return []byte(b.String())
}

// keyFieldWidths are the hex widths of the key message's fields: LID, OUT,
// QPN, PSN, RKEY, VADDR, 16 GID bytes, SRQN.
var keyFieldWidths = []int{4, 4, 6, 6, 8, 16, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 8}

// ParseKeyMsg parses a key message. perftest parses each field with
// strtol, so any case is accepted; the layout itself must be exact,
// because a message of another size desynchronises the exchange.
func ParseKeyMsg(b []byte) (KeyMsg, error) {
	var k KeyMsg
	if len(b) != KeyMsgSize {
		return k, fmt.Errorf("key message of %d bytes, want %d", len(b), KeyMsgSize)
	}
	if b[KeyMsgSize-1] != 0 {
		return k, fmt.Errorf("key message %q does not end with NUL", b)
	}
	fields := strings.Split(string(b[:KeyMsgSize-1]), ":")
	if len(fields) != len(keyFieldWidths)+1 || fields[len(fields)-1] != "" {
		return k, fmt.Errorf("key message %q: want %d colon-terminated fields", b[:KeyMsgSize-1], len(keyFieldWidths))
	}
	vals := make([]uint64, len(keyFieldWidths))
	for i, w := range keyFieldWidths {
		if len(fields[i]) != w {
			return k, fmt.Errorf("key message %q: field %d is %q, want %d hex digits", b[:KeyMsgSize-1], i, fields[i], w)
		}
		v, err := strconv.ParseUint(fields[i], 16, 64)
		if err != nil {
			return k, fmt.Errorf("key message %q: field %d: %v", b[:KeyMsgSize-1], i, err)
		}
		vals[i] = v
	}
	k.LID, k.OutReads, k.QPN, k.PSN = uint16(vals[0]), uint16(vals[1]), uint32(vals[2]), uint32(vals[3])
	k.RKey, k.VAddr = uint32(vals[4]), vals[5]
	for i := range k.GID {
		k.GID[i] = byte(vals[6+i])
	}
	k.SRQN = uint32(vals[22])
	return k, nil
}

// VersionMsg is our version message: AdvertisedVersion, NUL, the rxectl
// marker and our RoCE UDP port, announcing no receive buffer and offering
// nothing.
func VersionMsg(udpPort uint16) []byte { return VersionMsgOffer(udpPort, Offer{}) }

// recvBufUnit is the unit of the receive buffer in the version message.
const recvBufUnit = 4096

// Offer is what an rxectl end announces to a gorxe peer in its version
// message, after the marker and the UDP port.
type Offer struct {
	// RecvBuffer is the socket receive buffer each of this end's
	// receive sockets was granted, in bytes as getsockopt reports it, and
	// RecvSockets their number (one per completion vector; datagrams are
	// steered to socket DestQPN modulo RecvSockets): the peer keeps each
	// QP's packets in flight within that QP's share of its socket's
	// buffer (the perftest package's peerBuffer, rxe.QP.SetPeerReceiveBuffer).
	RecvBuffer, RecvSockets int
	// SelectiveRepeat offers selective repeat (docs/recovery.md); it is
	// used only if the peer offers it too.
	SelectiveRepeat bool
}

// Layout of the last byte of the version message: the socket count in
// the low 7 bits, the selective-repeat offer in the top bit. An older
// rxectl sends a socket count of 0 or 1 there, i.e. no offer.
const (
	socketsMask = 0x7F
	srOfferBit  = 0x80
)

// MaxRecvSockets is the largest socket count the version message
// carries; a device with more sockets announces this many.
const MaxRecvSockets = socketsMask

// VersionMsgBuffer is VersionMsgOffer with a receive buffer and no
// selective-repeat offer.
func VersionMsgBuffer(udpPort uint16, recvBuf, sockets int) []byte {
	return VersionMsgOffer(udpPort, Offer{RecvBuffer: recvBuf, RecvSockets: sockets})
}

// VersionMsgOffer is our version message with an offer in its last three
// bytes: the receive buffer in 4 KiB units (big-endian, at most 65535
// units), then one byte holding the socket count (at most 127) and, in
// its top bit, the selective-repeat offer. A perftest peer reads only up
// to the NUL; an older rxectl sends zeros or a socket count of 1 there,
// which offer nothing.
func VersionMsgOffer(udpPort uint16, o Offer) []byte {
	b := make([]byte, VersionMsgSize)
	n := copy(b, AdvertisedVersion)
	n++ // the NUL
	n += copy(b[n:], rxectlMarker)
	binary.BigEndian.PutUint16(b[n:], udpPort)
	n += 2
	binary.BigEndian.PutUint16(b[n:], uint16(min(max(o.RecvBuffer/recvBufUnit, 0), 0xFFFF)))
	b[n+2] = byte(min(max(o.RecvSockets, 0), socketsMask))
	if o.SelectiveRepeat {
		b[n+2] |= srOfferBit
	}
	return b
}

// PeerVersion is what a peer's version message says.
type PeerVersion struct {
	Text  string  // up to the NUL, e.g. "6.06"
	Value float64 // atof(Text)
	// RxeCtl is true when the peer is rxectl; UDPPort is then its RoCE
	// UDP port.
	RxeCtl  bool
	UDPPort uint16
	// Offer is what an rxectl peer announced (VersionMsgOffer); zero for
	// perftest.
	Offer
}

// ParseVersionMsg reads a peer's version message as perftest does (atof of
// the NUL-terminated string) and looks for the rxectl marker after the NUL.
func ParseVersionMsg(b []byte) PeerVersion {
	var v PeerVersion
	end := bytes.IndexByte(b, 0)
	if end < 0 {
		end = len(b)
	}
	v.Text = string(b[:end])
	v.Value = atof(v.Text)
	rest := b[min(end+1, len(b)):]
	if len(rest) >= len(rxectlMarker)+2 && string(rest[:len(rxectlMarker)]) == rxectlMarker {
		v.RxeCtl = true
		v.UDPPort = binary.BigEndian.Uint16(rest[len(rxectlMarker):])
		if x := rest[len(rxectlMarker)+2:]; len(x) >= 3 {
			v.RecvBuffer = int(binary.BigEndian.Uint16(x)) * recvBufUnit
			v.RecvSockets = int(x[2] & socketsMask)
			v.SelectiveRepeat = x[2]&srOfferBit != 0
		}
	}
	return v
}

// atof parses the longest leading decimal number of s, like C's atof
// (0 when there is none).
func atof(s string) float64 {
	s = strings.TrimLeft(s, " \t\n\r\v\f")
	end := 0
	if end < len(s) && (s[end] == '+' || s[end] == '-') {
		end++
	}
	digits := 0
	for end < len(s) && s[end] >= '0' && s[end] <= '9' {
		end++
		digits++
	}
	if end < len(s) && s[end] == '.' {
		end++
		for end < len(s) && s[end] >= '0' && s[end] <= '9' {
			end++
			digits++
		}
	}
	if digits == 0 {
		return 0
	}
	v, err := strconv.ParseFloat(strings.TrimSuffix(s[:end], "."), 64)
	if err != nil {
		return 0
	}
	return v
}

// Int32Msg and Uint64Msg encode the system data and report values
// (perftest's hton_int / hton_long: big-endian).
func Int32Msg(v int) []byte { return binary.BigEndian.AppendUint32(nil, uint32(v)) }

// Uint64Msg encodes a 64-bit report value (hton_long).
func Uint64Msg(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// DoubleMsg encodes a double as perftest's hton_double: the IEEE-754 bits
// byte-swapped to big-endian on a little-endian host.
func DoubleMsg(v float64) []byte { return Uint64Msg(math.Float64bits(v)) }

// MTUMsg is the MTU message: the ibv_mtu enum in decimal and a NUL
// (sprintf("%d") into a char array of which the first 2 bytes are sent).
func MTUMsg(enum int) []byte {
	b := make([]byte, MTUMsgSize)
	copy(b, strconv.Itoa(enum))
	return b
}

// ParseMTUMsg is strtol(msg, NULL, 10) of an MTU message.
func ParseMTUMsg(b []byte) int {
	end := bytes.IndexByte(b, 0)
	if end < 0 {
		end = len(b)
	}
	return int(atof(string(b[:end])))
}

// Pipe carries whole messages: one Write per message (perftest issues
// one read() per message and treats a short read as fatal) and a full
// read per message.
type Pipe interface {
	// Send writes one message.
	Send(b []byte) error
	// Recv reads one message of len(b) bytes.
	Recv(b []byte) error
	// Finish ends the connection: with done, it sends "done\0" and reads
	// the peer's, then it half-closes and waits (briefly) for the peer to
	// close.
	Finish(done bool) error
	// Close closes the connection at once.
	Close() error
}

// TCPPipe is the Pipe over a TCP connection.
type TCPPipe struct{ c net.Conn }

// NewTCPPipe returns the Pipe over c.
func NewTCPPipe(c net.Conn) TCPPipe { return TCPPipe{c} }

// Send writes b in one Write.
func (p TCPPipe) Send(b []byte) error {
	_, err := p.c.Write(b)
	return err
}

// Recv reads exactly len(b) bytes.
func (p TCPPipe) Recv(b []byte) error {
	_, err := io.ReadFull(p.c, b)
	return err
}

// finishTimeout bounds how long finish waits for the peer's "done" and
// its close.
const finishTimeout = 3 * time.Second

// Finish ends the connection as perftest's ends do (see Pipe).
func (p TCPPipe) Finish(done bool) error {
	defer p.c.Close()
	p.c.SetDeadline(time.Now().Add(finishTimeout))
	if done {
		// perftest up to 6.2x writes "done" and closes without reading
		// ours; newer ones just close. Neither is an error.
		p.c.Write(doneMsg)
		buf := make([]byte, len(doneMsg))
		io.ReadFull(p.c, buf)
	}
	if tc, ok := p.c.(*net.TCPConn); ok {
		tc.CloseWrite()
	}
	io.Copy(io.Discard, p.c)
	return nil
}

// Close closes the connection.
func (p TCPPipe) Close() error { return p.c.Close() }

// Conn is one end of the exchange.
type Conn struct {
	p      Pipe
	client bool
	// cm: the key messages are rdma_cm's binary ones (MarshalCM), sent
	// with gidIndex; cmTail: in perftest 6.29's layout (MarshalCMTail).
	cm       bool
	cmTail   bool
	gidIndex int
	// started: the run has started (RunStarted); a close of the peer's
	// from here on is ErrPeerEnded.
	started bool
}

// NewConn returns the client's or the server's end of the exchange over p.
func NewConn(p Pipe, client bool) *Conn { return &Conn{p: p, client: client} }

// NewCMConn returns the client's or the server's end of the exchange over
// p, a pipe over an rdma_cm connection (perftest -R): the messages are
// those of NewConn except the key messages, binary (MarshalCM).
func NewCMConn(p Pipe, client bool, gidIndex int) *Conn {
	return &Conn{p: p, client: client, cm: true, gidIndex: gidIndex}
}

// SetPeerVersion tells o the peer's version. Over rdma_cm, a peer of
// version CMTailMinVersion or later sends and reads the key message in
// its CMKeyMsgSizeTail-byte layout, and o then does too (perftest's
// rdma_write_keys and rdma_read_keys do not look at the peer's version).
func (o *Conn) SetPeerVersion(v PeerVersion) { o.cmTail = v.Value >= CMTailMinVersion }

// RunStarted tells o that the exchanges that set the test up are over
// and the run has started. A peer that closes the connection before this
// most likely failed on this end's messages: it runs another test or
// other options (ErrPeerClosed). One that closes after it ended during
// or after the run: it failed, was killed or was interrupted, or ran a
// test the setup exchanges could not tell apart from this one, and a
// step that finds the close says so (ErrPeerEnded).
func (o *Conn) RunStarted() { o.started = true }

// Finish ends the connection (Pipe.Finish).
func (o *Conn) Finish(done bool) error { return o.p.Finish(done) }

// Close closes the connection at once.
func (o *Conn) Close() error { return o.p.Close() }

// Exchange is perftest's symmetric exchange primitive: the client writes then
// reads, the server reads then writes. rem must have the size of my.
func (o *Conn) Exchange(step string, my, rem []byte) error {
	var err error
	if o.client {
		if err = o.p.Send(my); err == nil {
			err = o.p.Recv(rem)
		}
	} else {
		if err = o.p.Recv(rem); err == nil {
			err = o.p.Send(my)
		}
	}
	if err != nil {
		return oobError(step, err, o.started)
	}
	return nil
}

// Handshake exchanges key messages (ctx_hand_shake).
func (o *Conn) Handshake(step string, my KeyMsg) (KeyMsg, error) {
	if o.cm {
		rem := make([]byte, CMKeyMsgSize)
		msg, parse := my.MarshalCM(o.gidIndex), ParseCMKeyMsg
		if o.cmTail {
			rem = make([]byte, CMKeyMsgSizeTail)
			msg, parse = my.MarshalCMTail(o.gidIndex), ParseCMKeyMsgTail
		}
		if err := o.Exchange(step, msg, rem); err != nil {
			return KeyMsg{}, err
		}
		k, err := parse(rem)
		if err != nil {
			return KeyMsg{}, fmt.Errorf("%s: %w (does the peer run with -R too?)", step, err)
		}
		return k, nil
	}
	rem := make([]byte, KeyMsgSize)
	if err := o.Exchange(step, my.Marshal(), rem); err != nil {
		return KeyMsg{}, err
	}
	k, err := ParseKeyMsg(rem)
	if err != nil {
		return KeyMsg{}, fmt.Errorf("%s: %w (is the peer perftest or rxectl, in Ethernet exchange mode, without -R/-z?)", step, err)
	}
	return k, nil
}

// ExchangeReports is xchg_bw_reports for peers of version >= 5.33: size,
// iterations (u64), peak, average and message rate, each exchanged on its
// own.
func (o *Conn) ExchangeReports(my report.BW) (report.BW, error) {
	var rem report.BW
	msgs := []struct {
		name string
		my   []byte
		set  func([]byte)
	}{
		{"size", Uint64Msg(my.Size), func(b []byte) { rem.Size = binary.BigEndian.Uint64(b) }},
		{"iterations", Uint64Msg(my.Iters), func(b []byte) { rem.Iters = binary.BigEndian.Uint64(b) }},
		{"BW peak", DoubleMsg(my.Peak), func(b []byte) { rem.Peak = math.Float64frombits(binary.BigEndian.Uint64(b)) }},
		{"BW average", DoubleMsg(my.Avg), func(b []byte) { rem.Avg = math.Float64frombits(binary.BigEndian.Uint64(b)) }},
		{"message rate", DoubleMsg(my.MsgRate), func(b []byte) { rem.MsgRate = math.Float64frombits(binary.BigEndian.Uint64(b)) }},
	}
	for _, m := range msgs {
		b := make([]byte, 8)
		if err := o.Exchange("exchanging the "+m.name+" report", m.my, b); err != nil {
			return rem, err
		}
		m.set(b)
	}
	return rem, nil
}

// CloseConnection is ctx_close_connection: a last key exchange, then "done".
func (o *Conn) CloseConnection(my KeyMsg) error {
	if _, err := o.Handshake("closing the connection", my); err != nil {
		return err
	}
	return o.p.Finish(true)
}

// ErrPeerClosed is the error (wrapped with the step) of an exchange step
// that found the connection closed by the peer.
var ErrPeerClosed = errors.New("the peer closed the connection (it probably failed or runs a different test or options: see its output)")

// ErrPeerEnded is the error (wrapped with the step) of an exchange step
// that found the connection closed by the peer once the run had started
// (Conn.RunStarted): the peer went through the setup exchanges (versions,
// page and cache line sizes, MTU, key messages) and then ended: it failed,
// was killed or was interrupted. Those exchanges do not carry the test
// (verb, bandwidth or latency) nor the message size or iteration count,
// as perftest's do not: a peer that got through them may run another
// test (a send-bw server and a write-bw client do) and have ended on its
// own terms. errors.Is(ErrPeerEnded, ErrPeerClosed) holds.
var ErrPeerEnded error = peerEndedError{}

// peerEndedError is ErrPeerEnded's type: a close of the peer's that
// errors.Is also takes for ErrPeerClosed.
type peerEndedError struct{}

func (peerEndedError) Error() string {
	return "the peer closed the connection after the run started (it ended: it failed, was killed or interrupted: see its output)"
}

// Is reports ErrPeerEnded as ErrPeerClosed too.
func (peerEndedError) Is(target error) bool { return target == ErrPeerClosed }

// oobError explains a failed exchange step; started says whether the run
// had started (Conn.RunStarted), which decides how a close of the peer's
// is explained.
func oobError(step string, err error, started bool) error {
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		if started {
			return fmt.Errorf("%s: %w", step, ErrPeerEnded)
		}
		return fmt.Errorf("%s: %w", step, ErrPeerClosed)
	case errors.Is(err, net.ErrClosed):
		return fmt.Errorf("%s: interrupted", step)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("%s: the peer sent nothing in time (is it rxectl or perftest, running the same test?)", step)
	}
	return fmt.Errorf("%s: %w", step, err)
}
