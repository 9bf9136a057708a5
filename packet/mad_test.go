package packet

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

const rdmacmCapture = "../testdata/captures/kernel-rxe_rdmacm_send_4KiB.pcap"

// captureMAD is one CM MAD of a capture with the addressing around it.
type captureMAD struct {
	frame    int
	src, dst netip.Addr
	sport    uint16
	pkt      Packet
	hdr      MADHeader
	msg      []byte
}

// cmMADs returns the CM MADs (UD SEND_ONLY to QP1) of a capture, in order.
func cmMADs(t *testing.T, path string) []captureMAD {
	t.Helper()
	var out []captureMAD
	for i, f := range readPcap(t, path) {
		ip := etherIP(f)
		if len(ip) < 28 || ip[0]>>4 != 4 || ip[9] != 17 {
			continue
		}
		udp := ip[20:]
		if binary.BigEndian.Uint16(udp[2:]) != 4791 {
			continue
		}
		p, err := Parse(udp[8:])
		require.NoError(t, err)
		if p.DestQP() != GSIQPN {
			continue
		}
		h, msg, err := DecodeCMHeader(p.Payload())
		require.NoError(t, err, "frame %d", i)
		out = append(out, captureMAD{frame: i, src: netip.AddrFrom4([4]byte(ip[12:16])), dst: netip.AddrFrom4([4]byte(ip[16:20])),
			sport: binary.BigEndian.Uint16(udp), pkt: p, hdr: h, msg: msg})
	}
	return out
}

func TestCMCaptureDecodesByHand(t *testing.T) {
	mads := cmMADs(t, rdmacmCapture)
	var attrs []CMAttr
	for _, m := range mads {
		attrs = append(attrs, CMAttr(m.hdr.AttrID))
		// Every MAD is a UD SEND_ONLY from QP1 with the GSI Q_Key and the
		// default P_Key, 256 bytes of payload.
		require.Equal(t, UDSendOnly, m.pkt.Opcode())
		require.Equal(t, uint32(GSIQKey), m.pkt.DETH().QKey())
		require.Equal(t, uint32(GSIQPN), m.pkt.DETH().SrcQP())
		require.Equal(t, uint16(0xFFFF), m.pkt.BTH().PKey())
		require.Len(t, m.pkt.Payload(), MADSize)
		require.Equal(t, uint8(MethodSend), m.hdr.Method)
		require.Zero(t, m.hdr.Status)
		require.Zero(t, m.hdr.AttrMod)
	}
	require.Equal(t, []CMAttr{AttrREQ, AttrREP, AttrRTU, AttrREQ, AttrREP, AttrRTU, AttrDREQ, AttrDREP, AttrDREQ, AttrDREP}, attrs)

	client, server := netip.MustParseAddr("10.77.0.3"), netip.MustParseAddr("10.77.0.2")

	// Frame 0: the first REQ, from the client 10.77.0.3 (read byte by byte
	// from the hex dump of the capture).
	var req REQ
	require.NoError(t, req.Decode(mads[0].msg))
	require.Equal(t, client, mads[0].src)
	require.Equal(t, uint64(0x00000002958e0854), mads[0].hdr.TID)
	require.Equal(t, uint32(0x54088e95), req.LocalCommID)
	require.Zero(t, req.VendorID)
	require.Equal(t, uint64(0x0000000001064853), req.ServiceID)
	proto, port, ok := ParseRDMACMServiceID(req.ServiceID)
	require.True(t, ok)
	require.Equal(t, uint8(RDMACMProtoTCP), proto)
	require.Equal(t, uint16(18515), port)
	require.Equal(t, uint64(0x505400fffe770003), req.LocalCAGUID)
	require.Zero(t, req.LocalQKey)
	require.Equal(t, uint32(0x39), req.LocalQPN)
	require.Zero(t, req.ResponderResources)
	require.Zero(t, req.InitiatorDepth)
	require.Equal(t, uint8(20), req.RemoteCMResponseTimeout)
	require.Equal(t, uint8(CMTransportRC), req.TransportServiceType)
	require.False(t, req.EndToEndFlowControl)
	require.Equal(t, uint32(0x7c8cc5), req.StartingPSN)
	require.Equal(t, uint8(20), req.LocalCMResponseTimeout)
	require.Equal(t, uint8(7), req.RetryCount)
	require.Equal(t, uint16(0xFFFF), req.PKey)
	require.Equal(t, uint8(3), req.PathMTU) // 1024
	require.False(t, req.RDCExists)
	require.Equal(t, uint8(7), req.RNRRetryCount)
	require.Equal(t, uint8(15), req.MaxCMRetries)
	require.False(t, req.SRQ)
	require.Zero(t, req.ExtendedTransportType)
	require.Equal(t, uint16(0xFFFF), req.Primary.LocalLID)
	require.Equal(t, uint16(0xFFFF), req.Primary.RemoteLID)
	require.Equal(t, GIDFromAddr(client), req.Primary.LocalGID)
	require.Equal(t, GIDFromAddr(server), req.Primary.RemoteGID)
	require.Equal(t, client, AddrFromGID(req.Primary.LocalGID))
	require.Equal(t, uint32(0xb7051), req.Primary.FlowLabel)
	require.Zero(t, req.Primary.PacketRate)
	require.Zero(t, req.Primary.TrafficClass)
	require.Equal(t, uint8(64), req.Primary.HopLimit)
	require.Zero(t, req.Primary.SL)
	require.False(t, req.Primary.SubnetLocal)
	require.Equal(t, uint8(19), req.Primary.LocalACKTimeout)
	require.Equal(t, CMPath{}, req.Alternate)
	var ip CMIPHeader
	require.NoError(t, ip.Decode(req.PrivateData[:]))
	require.Equal(t, CMIPHeader{IPVersion: 4, SrcPort: 57410, Src: client, Dst: server}, ip)

	// Frame 1: the REP from the server.
	var rep REP
	require.NoError(t, rep.Decode(mads[1].msg))
	require.Equal(t, server, mads[1].src)
	require.Equal(t, mads[0].hdr.TID, mads[1].hdr.TID, "REP answers in the REQ's transaction")
	require.Equal(t, uint32(0xccfadc13), rep.LocalCommID)
	require.Equal(t, req.LocalCommID, rep.RemoteCommID)
	require.Zero(t, rep.LocalQKey)
	require.Equal(t, uint32(0x3d), rep.LocalQPN)
	require.Zero(t, rep.LocalEECN)
	require.Equal(t, uint32(0x37140f), rep.StartingPSN)
	require.Zero(t, rep.VendorID)
	require.Zero(t, rep.ResponderResources)
	require.Zero(t, rep.InitiatorDepth)
	require.Equal(t, uint8(15), rep.TargetACKDelay)
	require.Zero(t, rep.FailoverAccepted)
	require.False(t, rep.EndToEndFlowControl)
	require.Equal(t, uint8(7), rep.RNRRetryCount)
	require.False(t, rep.SRQ)
	require.Equal(t, uint64(0x505400fffe770002), rep.LocalCAGUID)
	require.Equal(t, [REPPrivateDataSize]byte{}, rep.PrivateData)

	// Frame 2: the RTU.
	var rtu RTU
	require.NoError(t, rtu.Decode(mads[2].msg))
	require.Equal(t, mads[0].hdr.TID, mads[2].hdr.TID)
	require.Equal(t, RTU{LocalCommID: req.LocalCommID, RemoteCommID: rep.LocalCommID}, rtu)

	// The second connection: the client's DREQ and the server's DREP, then
	// the server's DREQ of the first connection and the client's DREP.
	var rep2 REP
	require.NoError(t, rep2.Decode(mads[4].msg))
	var dreq DREQ
	require.NoError(t, dreq.Decode(mads[6].msg))
	require.Equal(t, client, mads[6].src)
	require.Equal(t, DREQ{LocalCommID: 0x55088e95, RemoteCommID: 0xc8fadc13, RemoteQPN: rep2.LocalQPN}, dreq)
	require.Equal(t, uint32(0x3e), dreq.RemoteQPN)
	var drep DREP
	require.NoError(t, drep.Decode(mads[7].msg))
	require.Equal(t, mads[6].hdr.TID, mads[7].hdr.TID)
	require.Equal(t, DREP{LocalCommID: 0xc8fadc13, RemoteCommID: 0x55088e95}, drep)
	require.NoError(t, dreq.Decode(mads[8].msg))
	require.Equal(t, server, mads[8].src)
	require.Equal(t, uint64(0x0000000213dcfacc), mads[8].hdr.TID)
	require.Equal(t, DREQ{LocalCommID: rep.LocalCommID, RemoteCommID: req.LocalCommID, RemoteQPN: req.LocalQPN}, dreq)
}

// TestCMCaptureRoundTrip: every CM MAD of the capture decodes and encodes
// back to the same 256 bytes.
func TestCMCaptureRoundTrip(t *testing.T) {
	for _, m := range cmMADs(t, rdmacmCapture) {
		msg, err := DecodeCMMessage(m.msg, CMAttr(m.hdr.AttrID))
		require.NoError(t, err)
		out := make([]byte, MADSize)
		EncodeCM(out, m.hdr.TID, msg)
		require.Equal(t, m.pkt.Payload(), out, "frame %d %v", m.frame, CMAttr(m.hdr.AttrID))
	}
}

func TestCMDecodeAllocatesNothing(t *testing.T) {
	mads := cmMADs(t, rdmacmCapture)
	var req REQ
	var ip CMIPHeader
	n := testing.AllocsPerRun(100, func() {
		_, msg, _ := DecodeCMHeader(mads[0].pkt.Payload())
		_ = req.Decode(msg)
		_ = ip.Decode(req.PrivateData[:])
	})
	require.Zero(t, n)
}

func TestCMMessagesRoundTrip(t *testing.T) {
	req := REQ{LocalCommID: 1, VendorID: 0xABCDEF, ServiceID: RDMACMServiceID(RDMACMProtoTCP, 7471), LocalCAGUID: 2,
		LocalQKey: 3, LocalQPN: 0xFFFFFF, ResponderResources: 16, LocalEECN: 5, InitiatorDepth: 16, RemoteEECN: 6,
		RemoteCMResponseTimeout: 31, TransportServiceType: CMTransportUC, EndToEndFlowControl: true, StartingPSN: 0xABCDEF,
		LocalCMResponseTimeout: 17, RetryCount: 6, PKey: 0x8001, PathMTU: 5, RDCExists: true, RNRRetryCount: 5,
		MaxCMRetries: 9, SRQ: true, ExtendedTransportType: 3, SAPSupported: true,
		Primary: CMPath{LocalLID: 1, RemoteLID: 2, LocalGID: [16]byte{1}, RemoteGID: [16]byte{15: 2}, FlowLabel: 0xFFFFF,
			PacketRate: 63, TrafficClass: 0xE0, HopLimit: 255, SL: 15, SubnetLocal: true, LocalACKTimeout: 31},
		Alternate: CMPath{FlowLabel: 1, PacketRate: 1, SL: 1, LocalACKTimeout: 1}}
	req.PrivateData[0], req.PrivateData[91] = 0xAA, 0xBB
	mra := MRA{LocalCommID: 1, RemoteCommID: 2, MessageMRAed: MsgREP, ServiceTimeout: 31}
	mra.PrivateData[221] = 1
	rej := REJ{LocalCommID: 1, RemoteCommID: 2, MessageRejected: MsgOther, RejectedInfoLen: 127, Reason: RejConsumerReject}
	rej.ARI[71], rej.PrivateData[147] = 1, 2
	rep := REP{LocalCommID: 1, RemoteCommID: 2, LocalQKey: 3, LocalQPN: 4, LocalEECN: 5, StartingPSN: 6, VendorID: 0x123456,
		ResponderResources: 7, InitiatorDepth: 8, TargetACKDelay: 31, FailoverAccepted: 3, EndToEndFlowControl: true,
		RNRRetryCount: 7, SRQ: true, LocalCAGUID: 9}
	rep.PrivateData[195] = 1
	sidrRep := SIDRREP{RequestID: 1, Status: SIDRNoQP, AddInfoLen: 3, VendorID: 0xABCDEF, QPN: 0x123456, ServiceID: 4, QKey: 5}
	sidrRep.AddInfo[71], sidrRep.PrivateData[135] = 1, 2
	for _, m := range []CMMessage{&req, &mra, &rej, &rep,
		&RTU{LocalCommID: 1, RemoteCommID: 2, PrivateData: [224]byte{223: 1}},
		&DREQ{LocalCommID: 1, RemoteCommID: 2, RemoteQPN: 0xFFFFFF, PrivateData: [220]byte{219: 1}},
		&DREP{LocalCommID: 1, RemoteCommID: 2, PrivateData: [224]byte{7: 1}},
		&SIDRREQ{RequestID: 1, PKey: 0xFFFF, ServiceID: 3, PrivateData: [216]byte{215: 1}},
		&sidrRep,
	} {
		b := make([]byte, MADSize)
		require.Equal(t, MADSize, EncodeCM(b, 0x1122334455667788, m))
		h, msg, err := DecodeCMHeader(b)
		require.NoError(t, err)
		require.Equal(t, uint64(0x1122334455667788), h.TID)
		got, err := DecodeCMMessage(msg, CMAttr(h.AttrID))
		require.NoError(t, err)
		require.Equal(t, m, got, "%v", m.Attr())
	}
}

func TestCMIPHeader(t *testing.T) {
	for _, tc := range []struct{ src, dst string }{{"192.0.2.1", "192.0.2.2"}, {"2001:db8::1", "2001:db8::2"}} {
		h := CMIPHeader{SrcPort: 40000, Src: netip.MustParseAddr(tc.src), Dst: netip.MustParseAddr(tc.dst)}
		b := make([]byte, CMIPHeaderSize)
		h.Encode(b)
		var got CMIPHeader
		require.NoError(t, got.Decode(b))
		h.IPVersion = got.IPVersion
		require.Equal(t, h, got)
		if h.Src.Is4() {
			require.Equal(t, byte(0x40), b[1])
			require.Equal(t, make([]byte, 12), b[4:16], "IPv4 in the last 4 bytes of 16")
		}
	}
	// Mixed families: an IPv6 header (which Decode accepts) whose source
	// is IPv4-mapped, and an IPv4 source with an IPv6 destination, encode
	// as IPv6 with the IPv4 address mapped; two IPv4-mapped addresses as
	// IPv4. Encode used to call As4 on the IPv6 destination and panic.
	for _, tc := range []struct {
		src, dst string
		version  byte
	}{
		{"::ffff:192.0.2.1", "2001:db8::2", 6},
		{"192.0.2.1", "2001:db8::2", 6},
		{"2001:db8::1", "192.0.2.2", 6},
		{"::ffff:192.0.2.1", "::ffff:192.0.2.2", 4},
	} {
		h := CMIPHeader{SrcPort: 40000, Src: netip.MustParseAddr(tc.src), Dst: netip.MustParseAddr(tc.dst)}
		b := make([]byte, CMIPHeaderSize)
		require.NotPanics(t, func() { h.Encode(b) }, "%s → %s", tc.src, tc.dst)
		var got CMIPHeader
		require.NoError(t, got.Decode(b))
		require.Equal(t, tc.version, got.IPVersion, "%s → %s", tc.src, tc.dst)
		require.Equal(t, h.Src.Unmap(), got.Src.Unmap())
		require.Equal(t, h.Dst.Unmap(), got.Dst.Unmap())
		var again CMIPHeader
		got.Encode(b)
		require.NoError(t, again.Decode(b))
		require.Equal(t, got, again, "Decode, Encode, Decode")
	}
	b := make([]byte, CMIPHeaderSize)
	b[1] = 0x50
	var h CMIPHeader
	require.ErrorIs(t, h.Decode(b), ErrCMIPHeader)
	require.ErrorIs(t, h.Decode(b[:10]), ErrMADTruncated)
	_, _, ok := ParseRDMACMServiceID(0x0000000002064853)
	require.False(t, ok)
}

func TestCMHeaderErrors(t *testing.T) {
	b := make([]byte, MADSize)
	EncodeCM(b, 1, &RTU{})
	for _, tc := range []struct {
		name string
		mut  func([]byte) []byte
		err  error
	}{
		{"short", func(b []byte) []byte { return b[:MADSize-1] }, ErrMADTruncated},
		{"base version", func(b []byte) []byte { b[0] = 2; return b }, ErrMADVersion},
		{"class", func(b []byte) []byte { b[1] = 0x03; return b }, ErrNotCM},
		{"class version", func(b []byte) []byte { b[2] = 1; return b }, ErrNotCM},
	} {
		_, _, err := DecodeCMHeader(tc.mut(bytes.Clone(b)))
		require.ErrorIs(t, err, tc.err, tc.name)
	}
	_, err := DecodeCMMessage(make([]byte, CMDataSize), AttrLAP)
	require.ErrorIs(t, err, ErrCMAttr)
	require.Equal(t, "REQ", AttrREQ.String())
	require.Equal(t, "CMAttr(0x00ff)", CMAttr(0xff).String())
	require.Equal(t, "invalid service ID", RejInvalidServiceID.String())
}

func TestCMTimeout(t *testing.T) {
	require.Equal(t, int64(4096), CMTimeout(0))
	require.Equal(t, int64(4096)<<20, CMTimeout(20)) // about 4.3 s, rdma_cm's default
	// The exponent is a 5-bit field: bits above it are not part of it.
	require.Equal(t, CMTimeout(20), CMTimeout(0x20|20))
}

// FuzzCMMAD: decoding never panics; DecodeCMHeader refuses exactly the
// inputs shorter than a MAD (ErrMADTruncated), of a base version other
// than 1 (ErrMADVersion) and of another class or class version (ErrNotCM),
// and hands on the message area of the others with the header's fields
// as the bytes give them; DecodeCMMessage decodes that area for exactly
// the attributes of cmDecoded, refusing the others with ErrCMAttr; and
// whatever decodes re-encodes to a MAD that decodes to the same message,
// field for field (the round-trip property; reserved bits are sent as
// zero, so the bytes themselves may differ), and re-encodes to the same
// bytes.
func FuzzCMMAD(f *testing.F) {
	for _, m := range []CMMessage{&REQ{LocalQPN: 1}, &REP{}, &RTU{}, &MRA{}, &REJ{}, &DREQ{}, &DREP{}, &SIDRREQ{}, &SIDRREP{}} {
		b := make([]byte, MADSize)
		EncodeCM(b, 7, m)
		f.Add(b)
	}
	f.Add([]byte{1, 7, 2, 3})
	f.Add(append([]byte{MADBaseVersion, MgmtClassCM, CMClassVersion, 3, 16: 0x00, 17: byte(AttrLAP)}, make([]byte, MADSize-18)...)) // LAP
	f.Fuzz(func(t *testing.T, b []byte) {
		h, msg, err := DecodeCMHeader(b)
		switch {
		case len(b) < MADSize:
			require.ErrorIs(t, err, ErrMADTruncated)
			return
		case b[0] != MADBaseVersion:
			require.ErrorIs(t, err, ErrMADVersion)
			return
		case b[1] != MgmtClassCM || b[2] != CMClassVersion:
			require.ErrorIs(t, err, ErrNotCM)
			return
		}
		require.NoError(t, err)
		require.Equal(t, b[MADHeaderSize:MADSize], msg, "the message area")
		require.Equal(t, [3]uint64{binary.BigEndian.Uint64(b[8:]), uint64(binary.BigEndian.Uint16(b[16:])), uint64(b[3])},
			[3]uint64{h.TID, uint64(h.AttrID), uint64(h.Method)}, "TID, attribute and method")
		m, err := DecodeCMMessage(msg, CMAttr(h.AttrID))
		if !slices.Contains(cmDecoded, CMAttr(h.AttrID)) {
			require.ErrorIs(t, err, ErrCMAttr, "attribute %#04x", h.AttrID)
			require.Nil(t, m)
			return
		}
		require.NoError(t, err, "%v", CMAttr(h.AttrID))
		require.Equal(t, CMAttr(h.AttrID), m.Attr())
		out := make([]byte, MADSize)
		EncodeCM(out, h.TID, m)
		h2, msg2, err := DecodeCMHeader(out)
		if err != nil || h2.TID != h.TID || h2.AttrID != h.AttrID {
			t.Fatalf("header did not round-trip: %v %+v %+v", err, h, h2)
		}
		m2, err := DecodeCMMessage(msg2, CMAttr(h.AttrID))
		if err != nil {
			t.Fatal(err)
		}
		// Every field decoded is encoded: decoding the re-encoded MAD gives
		// back the same message (a field Encode left out would read as
		// zero here, though re-encoding that would repeat the omission).
		require.Equal(t, m, m2, "%v: decode(encode(m)) != m", m.Attr())
		out2 := make([]byte, MADSize)
		EncodeCM(out2, h.TID, m2)
		if !bytes.Equal(out, out2) {
			t.Fatalf("%v: re-encoding differs", m.Attr())
		}
		if req, ok := m.(*REQ); ok {
			var ip CMIPHeader
			if ip.Decode(req.PrivateData[:]) == nil {
				pd := make([]byte, CMIPHeaderSize)
				ip.Encode(pd)
				var ip2 CMIPHeader
				// Encode writes two IPv4-mapped addresses as IPv4.
				if err := ip2.Decode(pd); err != nil || ip2.Src.Unmap() != ip.Src.Unmap() || ip2.Dst.Unmap() != ip.Dst.Unmap() || ip2.SrcPort != ip.SrcPort {
					t.Fatalf("IP header did not round-trip: %v %+v %+v", err, ip, ip2)
				}
			}
		}
	})
}

// cmDecoded are the attributes of the CM messages DecodeCMMessage
// decodes: the connection messages of IBA 12.6 but LAP and APR
// (alternate paths), and the SIDR messages of 12.11.
var cmDecoded = []CMAttr{AttrREQ, AttrMRA, AttrREJ, AttrREP, AttrRTU, AttrDREQ, AttrDREP, AttrSIDRREQ, AttrSIDRREP}

// FuzzRDMACMServiceID: ParseRDMACMServiceID accepts exactly the service
// IDs with the IP CM prefix 0x0000000001 (IBTA A11.2.1), and what it
// accepts RDMACMServiceID makes again from the protocol and port.
func FuzzRDMACMServiceID(f *testing.F) {
	f.Add(RDMACMServiceID(RDMACMProtoTCP, 18515))
	f.Add(RDMACMServiceID(RDMACMProtoUDP, 0))
	f.Add(uint64(0x0000000002064853))
	f.Fuzz(func(t *testing.T, id uint64) {
		proto, port, ok := ParseRDMACMServiceID(id)
		require.Equal(t, id>>24 == 1, ok, "service ID %#016x", id)
		if ok {
			require.Equal(t, id, RDMACMServiceID(proto, port))
		} else {
			require.Zero(t, proto)
			require.Zero(t, port)
		}
	})
}

// TestREJReasonNames: every reason IBA table 108 defines has its name, the
// alternate path's (18–23, 33) included, as a dump of a REJ names them;
// an undefined code is shown as its number.
func TestREJReasonNames(t *testing.T) {
	for _, tc := range []struct {
		r    REJReason
		want string
	}{
		{RejInvalidPacketRate, "invalid packet rate"},
		{RejInvalidAltGID, "invalid alternate GID"},
		{RejInvalidAltLID, "invalid alternate LID"},
		{RejInvalidAltSL, "invalid alternate SL"},
		{RejInvalidAltTrafficClass, "invalid alternate traffic class"},
		{RejInvalidAltHopLimit, "invalid alternate hop limit"},
		{RejInvalidAltPacketRate, "invalid alternate packet rate"},
		{RejPortCMRedirect, "port and CM redirection"},
		{RejInvalidFlowLabel, "invalid flow label"},
		{RejInvalidAltFlowLabel, "invalid alternate flow label"},
		{34, "reason 0x0022"},
	} {
		require.Equal(t, tc.want, tc.r.String(), "code %d", tc.r)
	}
}

// TestCMIPHeaderRefusesMajorVersions: only major version 0 of the IP CM
// header is known (A11.2.2.1); any other is refused, as the kernel's
// cma_save_ip_info refuses a cma_version it does not know.
func TestCMIPHeaderRefusesMajorVersions(t *testing.T) {
	h := CMIPHeader{SrcPort: 40000, Src: netip.MustParseAddr("192.0.2.1"), Dst: netip.MustParseAddr("192.0.2.2")}
	b := make([]byte, CMIPHeaderSize)
	h.Encode(b)
	for _, v := range []byte{1, 2, 8, 15} {
		c := append([]byte(nil), b...)
		c[0] = v << 4
		var got CMIPHeader
		require.ErrorIs(t, got.Decode(c), ErrCMIPHeader, "major version %d", v)
	}
}

// TestREQSAPSupportedBit: SAP Supported is the bit after the 5-bit
// alternate local ACK timeout in byte 139 of the REQ (IBA 12.6.5; the
// kernel's CM_REQ_SAP_SUPPORTED).
func TestREQSAPSupportedBit(t *testing.T) {
	b := make([]byte, CMDataSize)
	(&REQ{SAPSupported: true}).Encode(b)
	require.Equal(t, byte(0x04), b[139])
	var m REQ
	require.NoError(t, m.Decode(b))
	require.True(t, m.SAPSupported)
	b[139] = 0xFB
	require.NoError(t, m.Decode(b))
	require.False(t, m.SAPSupported)
}

// TestREPFailoverAcceptedBits: Failover Accepted is the 2 bits after the
// 5-bit target ACK delay in byte 26 of the REP (IBA 12.6.8; the kernel's
// CM_REP_FAILOVER_ACCEPTED).
func TestREPFailoverAcceptedBits(t *testing.T) {
	for _, tc := range []struct {
		v    uint8
		wire byte
	}{{0, 0x00}, {1, 0x02}, {2, 0x04}, {3, 0x06}} {
		b := make([]byte, CMDataSize)
		(&REP{FailoverAccepted: tc.v}).Encode(b)
		require.Equal(t, tc.wire, b[26], "failover accepted %d", tc.v)
		b[26] |= 0xF9 // target ACK delay and end-to-end flow control set
		var m REP
		require.NoError(t, m.Decode(b))
		require.Equal(t, tc.v, m.FailoverAccepted)
	}
}
