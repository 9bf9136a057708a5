package dump

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/packet"
)

// TestCMLine: what dump's line says of the CM MAD a packet carries. Only
// a UD packet to QP1 carries one (the GSI is QP1, a UD QP);
// a MAD the capture cut shows its header when it holds it, and nothing
// when it cut the DETH; a payload shorter than a MAD header is
// malformed whatever its second byte; an RDMA CM service ID names its
// port space (IBTA Annex A11.2.1: 0x06 TCP, 0x11 UDP); a REJ shows its
// reason, an MRA its service timeout; a SIDR_REQ shows its request ID,
// service ID and, under an RDMA CM service ID, the IP addresses of RDMA
// CM's header (IBTA Annex A11.2.2.1), a SIDR_REP its status by name (IBA
// 12.11.2, table 120), service ID, QPN and Q_Key.
func TestCMLine(t *testing.T) {
	req := func(sid uint64) []byte {
		mad := make([]byte, packet.MADSize)
		packet.EncodeCM(mad, 9, &packet.REQ{LocalCommID: 0x1234, ServiceID: sid, LocalQPN: 0x42, PathMTU: 3})
		return mad
	}
	gsi := func(op packet.Opcode, mad []byte) []byte {
		h := packet.Headers{BTH: packet.BTHFields{Opcode: op, PKey: packet.DefaultPKey, DestQP: packet.GSIQPN},
			DETH: packet.DETHFields{QKey: packet.GSIQKey, SrcQP: packet.GSIQPN}}
		return gsoFrame(t, cutTestPH, []gsoSegment{{h, mad}}, func(int) uint16 { return 1 })
	}
	msg := func(m packet.CMMessage) []byte {
		mad := make([]byte, packet.MADSize)
		packet.EncodeCM(mad, 9, m)
		return mad
	}
	// sidrREQ is a SIDR_REQ for sid whose private data starts with RDMA
	// CM's IP header (the client 10.0.0.1, RDMA CM port 40001).
	sidrREQ := func(sid uint64) *packet.SIDRREQ {
		m := &packet.SIDRREQ{RequestID: 5, PKey: packet.DefaultPKey, ServiceID: sid}
		(&packet.CMIPHeader{SrcPort: 40001, Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2")}).Encode(m.PrivateData[:])
		return m
	}
	const dethEnd = packet.BTHSize + 8
	tests := []struct {
		name    string
		frame   []byte
		capLen  int // 0: whole
		want    string
		without string
	}{
		{"REQ of the UDP port space", gsi(packet.UDSendOnly, req(packet.RDMACMServiceID(packet.RDMACMProtoUDP, 7174))),
			0, " sid=0x0000000001111c06 (udp:7174) ", ""},
		{"REQ of the TCP port space", gsi(packet.UDSendOnly, req(packet.RDMACMServiceID(packet.RDMACMProtoTCP, 18515))),
			0, " (tcp:18515) ", ""},
		{"REJ", gsi(packet.UDSendOnly, msg(&packet.REJ{LocalCommID: 1, RemoteCommID: 2, Reason: packet.RejNoQP})),
			0, " cm=REJ tid=0x0000000000000009 lcid=0x00000001 rcid=0x00000002 reason=1 (" + packet.RejNoQP.String() + ") ", ""},
		{"MRA", gsi(packet.UDSendOnly, msg(&packet.MRA{LocalCommID: 1, RemoteCommID: 2, ServiceTimeout: 17})),
			0, " cm=MRA tid=0x0000000000000009 lcid=0x00000001 rcid=0x00000002 timeout=17 ", ""},
		{"SIDR_REQ of the UDP port space", gsi(packet.UDSendOnly, msg(sidrREQ(packet.RDMACMServiceID(packet.RDMACMProtoUDP, 7174)))),
			0, " cm=SIDR_REQ tid=0x0000000000000009 reqid=0x00000005 sid=0x0000000001111c06 (udp:7174) ip=10.0.0.1:40001→10.0.0.2 ", ""},
		{"SIDR_REQ of another service", gsi(packet.UDSendOnly, msg(sidrREQ(0x1234))),
			0, " reqid=0x00000005 sid=0x0000000000001234 ICRC", " ip="},
		{"SIDR_REP", gsi(packet.UDSendOnly, msg(&packet.SIDRREP{RequestID: 5, QPN: 0x42, QKey: 0x01234567,
			ServiceID: packet.RDMACMServiceID(packet.RDMACMProtoUDP, 7174)})),
			0, " cm=SIDR_REP tid=0x0000000000000009 reqid=0x00000005 status=0 (valid) sid=0x0000000001111c06 (udp:7174) qpn=0x000042 qkey=0x01234567 ", ""},
		{"SIDR_REP refusing", gsi(packet.UDSendOnly, msg(&packet.SIDRREP{RequestID: 5, Status: packet.SIDRRejected})),
			0, " reqid=0x00000005 status=2 (rejected) sid=0x0000000000000000 qpn=0x000000 qkey=0x00000000 ", ""},
		{"SIDR_REP of a status the IBA does not define", gsi(packet.UDSendOnly, msg(&packet.SIDRREP{RequestID: 5, Status: 9})),
			0, " status=9 sid=", ""},
		{"RC SEND to QP1", gsi(packet.RCSendOnly, req(packet.RDMACMServiceID(packet.RDMACMProtoTCP, 18515))),
			0, "RC_SEND_ONLY qp=0x000001 ", " cm="},
		{"3-byte payload, not of the CM class", gsi(packet.UDSendOnly, []byte{1, 0x81, 2}), 0, " mad MALFORMED ", " mad class="},
		{"cut at the end of the DETH", gsi(packet.UDSendOnly, req(0)), roceOff + dethEnd, " mad (header not captured) ", ""},
		{"cut inside the DETH", gsi(packet.UDSendOnly, req(0)), roceOff + dethEnd - 4, " TRUNCATED ", " mad"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := tc.frame
			if tc.capLen > 0 {
				data = data[:tc.capLen]
			}
			f := Frame{Num: 1, CapLen: len(data), OrigLen: len(tc.frame)}
			DecodeFrame(&f, data, packet.LinkEthernet, Ports{packet.UDPPort})
			require.Equal(t, KindRoCE, f.Kind, "%v", f.Err)
			line := string(AppendText(nil, &f, []byte("0"), false))
			require.Contains(t, line, tc.want)
			if tc.without != "" {
				require.False(t, strings.Contains(line, tc.without), "%s", line)
			}
		})
	}
}
