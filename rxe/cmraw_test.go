package rxe

import (
	"net/netip"
	"testing"
	"time"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/packet"
	"github.com/stretchr/testify/require"
)

// rawCM is a CM peer a test drives by hand: the far end of a pipe whose
// near end is a device, with no CM agent of its own. It sends the MADs the
// test builds and hands over the ones the device sends.
type rawCM struct {
	t    *testing.T
	conn netdev.Conn
	dev  *Device
	mads chan rawMAD
}

// rawMAD is one CM MAD the device sent to the raw peer.
type rawMAD struct {
	attr packet.CMAttr
	tid  uint64
	hdr  []byte // the 24-byte MAD header, as sent
	msg  []byte
}

// newRawCM opens a device on one end of a pipe and returns it with a raw
// CM peer on the other end (127.0.0.2).
func newRawCM(t *testing.T) (*Device, *rawCM) {
	ca, cb := netdev.NewPipeWith(netdev.PipeOptions{Depth: 4096})
	d, err := Open(ca, Options{Name: "cm-raw", LinkMTU: 9000, OwnConn: true})
	require.NoError(t, err)
	p := &rawCM{t: t, conn: cb, dev: d, mads: make(chan rawMAD, 64)}
	t.Cleanup(func() { d.Close(); cb.Close() })
	go p.read()
	return d, p
}

// read passes the device's CM MADs to p.mads until the pipe closes.
func (p *rawCM) read() {
	msgs := []netdev.Message{{Buf: make([]byte, rxBufSize)}}
	for {
		k, err := p.conn.ReadBatch(msgs)
		if err != nil {
			return
		}
		if k == 0 {
			continue
		}
		pk, err := packet.Parse(msgs[0].Buf[:msgs[0].N])
		if err != nil || pk.DestQP() != packet.GSIQPN || len(pk.Payload()) < packet.MADSize {
			continue
		}
		h, msg, err := packet.DecodeCMHeader(pk.Payload())
		if err != nil {
			continue
		}
		select {
		case p.mads <- rawMAD{attr: packet.CMAttr(h.AttrID), tid: h.TID,
			hdr: append([]byte(nil), pk.Payload()[:packet.MADHeaderSize]...), msg: append([]byte(nil), msg...)}:
		default: // the test reads none of these any more
		}
	}
}

// addr returns the raw peer's address.
func (p *rawCM) addr() netip.Addr { return p.conn.LocalAddr().Addr() }

// send writes m to the device's QP1.
func (p *rawCM) send(tid uint64, m packet.CMMessage) {
	p.t.Helper()
	var mad [packet.MADSize]byte
	packet.EncodeCM(mad[:], tid, m)
	h := packet.Headers{BTH: packet.BTHFields{Opcode: packet.UDSendOnly, PKey: packet.DefaultPKey, DestQP: packet.GSIQPN},
		DETH: packet.DETHFields{QKey: packet.GSIQKey, SrcQP: packet.GSIQPN}}
	from := p.conn.LocalAddr()
	ph := packet.PseudoHeader{Src: from.Addr(), Dst: p.dev.addr, SrcPort: from.Port(), DstPort: p.dev.port, IPFlags: packet.IPv4FlagDF}
	buf := make([]byte, maxPacket)
	n, err := packet.Build(buf, &h, mad[:], &ph)
	require.NoError(p.t, err)
	_, err = p.conn.WriteBatch([]netdev.Message{{Buf: buf, N: n, Addr: p.dev.Addr()}})
	require.NoError(p.t, err)
}

// recv waits up to 2 s for the next MAD of kind attr from the device and
// decodes it into m; MADs of other kinds before it are skipped.
func (p *rawCM) recv(attr packet.CMAttr, m interface{ Decode([]byte) error }) uint64 {
	p.t.Helper()
	timeout := time.After(2 * time.Second)
	for {
		select {
		case r := <-p.mads:
			if r.attr != attr {
				continue
			}
			require.NoError(p.t, m.Decode(r.msg))
			return r.tid
		case <-timeout:
			p.t.Fatalf("no %v from the device within 2 s", attr)
			return 0
		}
	}
}

// req returns a REQ of the raw peer for the RDMA CM port, with RDMA CM's
// IP header and comm ID and QPN id.
func (p *rawCM) req(port uint16, id uint32) *packet.REQ {
	r := &packet.REQ{LocalCommID: id, LocalCAGUID: 0xAB, LocalQPN: id, StartingPSN: 100,
		ServiceID: packet.RDMACMServiceID(packet.RDMACMProtoTCP, port), TransportServiceType: packet.CMTransportRC,
		RemoteCMResponseTimeout: 20, LocalCMResponseTimeout: 20, MaxCMRetries: 15, RetryCount: 7, RNRRetryCount: 7,
		PKey: packet.DefaultPKey, PathMTU: uint8(MTU1024), ResponderResources: 16, InitiatorDepth: 16,
		Primary: packet.CMPath{LocalGID: packet.GIDFromAddr(p.addr()), RemoteGID: packet.GIDFromAddr(p.dev.addr),
			HopLimit: 64, LocalACKTimeout: 14}}
	(&packet.CMIPHeader{SrcPort: 40000, Src: p.addr(), Dst: p.dev.addr}).Encode(r.PrivateData[:])
	return r
}

// rtuFor returns the RTU that answers rep.
func rtuFor(rep *packet.REP) *packet.RTU {
	return &packet.RTU{LocalCommID: rep.RemoteCommID, RemoteCommID: rep.LocalCommID}
}

// next waits up to 2 s for the next MAD from the device, of any kind.
func (p *rawCM) next() rawMAD {
	p.t.Helper()
	select {
	case r := <-p.mads:
		return r
	case <-time.After(2 * time.Second):
		p.t.Fatal("no MAD from the device within 2 s")
		return rawMAD{}
	}
}
