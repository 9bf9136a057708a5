package dump

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
	"github.com/gorxe/gorxe/internal/testutil"
	"github.com/gorxe/gorxe/packet"
)

// tsharkJudgeFields are the fields TestDumpAgreesWithTshark reads from
// tshark (Wireshark 4.0's InfiniBand dissector), one column each.
var tsharkJudgeFields = []string{
	"frame.number",
	"infiniband.bth.opcode", "infiniband.bth.se", "infiniband.bth.m", "infiniband.bth.padcnt", "infiniband.bth.tver",
	"infiniband.bth.p_key", "infiniband.bth.destqp", "infiniband.bth.a", "infiniband.bth.psn",
	"infiniband.reth.va", "infiniband.reth.r_key", "infiniband.reth.dmalen",
	"infiniband.deth.q_key", "infiniband.deth.srcqp",
	"infiniband.aeth.syndrome", "infiniband.aeth.msn",
	"infiniband.immdt", "infiniband.ieth",
	"infiniband.atomiceth.swapdt", "infiniband.atomiceth.cmpdt", "infiniband.atomicacketh.origremdt",
	"infiniband.invariant.crc",
	"infiniband.mad.mgmtclass", "infiniband.mad.attributeid", "infiniband.mad.transactionid",
	"infiniband.cm.req", "infiniband.cm.req.serviceid", "infiniband.cm.req.localqpn", "infiniband.cm.req.startpsn",
	"infiniband.cm.req.pppmtu", "infiniband.cm.req.retrcount", "infiniband.cm.req.rnrretrcount",
	"infiniband.cm.req.prim_localacktout", "infiniband.cm.req.ip_cm.sport", "infiniband.cm.req.ip_cm.sip4",
	"infiniband.cm.req.ip_cm.dip4",
	"infiniband.cm.rep", "infiniband.cm.rep.remotecommid", "infiniband.cm.rep.localqpn", "infiniband.cm.rep.startpsn",
	"infiniband.cm.rep.rnrretrcount",
	"infiniband.cm.rtu.localcommid", "infiniband.cm.rtu.remotecommid",
	"infiniband.cm.rej.localcommid", "infiniband.cm.rej.remotecommid", "infiniband.cm.rej.reason",
	"infiniband.cm.dreq.localcommid", "infiniband.cm.dreq.remotecommid", "infiniband.cm.req.remoteqpneecn",
	"infiniband.cm.drsp.localcommid", "infiniband.cm.drsp.remotecommid",
}

// runTsharkFields runs tshark on file with the extra arguments args and
// returns, per frame tshark dissects as InfiniBand, the first value of
// each of tsharkJudgeFields by name (runTshark disables the
// RPC-over-RDMA heuristic).
func runTsharkFields(t *testing.T, tshark, file string, args ...string) map[int]map[string]string {
	t.Helper()
	base := append([]string{"-r", file, "-n"}, args...)
	base = append(base, "-T", "fields", "-E", "separator=|", "-E", "occurrence=f")
	for _, f := range tsharkJudgeFields {
		base = append(base, "-e", f)
	}
	out := testutil.Tshark(t, tshark, base)
	frames := map[int]map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		v := strings.Split(line, "|")
		require.Len(t, v, len(tsharkJudgeFields), "tshark line %q", line)
		if v[1] == "" {
			continue // not dissected as InfiniBand
		}
		m := map[string]string{}
		for i, f := range tsharkJudgeFields {
			m[f] = v[i]
		}
		n, err := strconv.Atoi(v[0])
		require.NoError(t, err)
		frames[n] = m
	}
	return frames
}

// cmCapture writes a capture of one CM MAD of each kind tshark 4.0
// dissects (REQ with RDMA CM's IP header, REP, RTU, REJ, DREQ, DREP), with
// values that differ from field to field, and returns its path.
func cmCapture(t *testing.T) string {
	req := &packet.REQ{LocalCommID: 0x11223344, ServiceID: packet.RDMACMServiceID(packet.RDMACMProtoTCP, 18515),
		LocalQPN: 0x123456, StartingPSN: 0xfedcba, RetryCount: 5, PathMTU: 4, RNRRetryCount: 6,
		Primary: packet.CMPath{LocalACKTimeout: 18}}
	(&packet.CMIPHeader{SrcPort: 40001, Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2")}).Encode(req.PrivateData[:])
	msgs := []packet.CMMessage{
		req,
		&packet.REP{LocalCommID: 1, RemoteCommID: 2, LocalQPN: 0x345678, StartingPSN: 0xabcdef, RNRRetryCount: 5},
		&packet.RTU{LocalCommID: 5, RemoteCommID: 6},
		&packet.REJ{LocalCommID: 7, RemoteCommID: 8, MessageRejected: packet.MsgREP, Reason: packet.RejConsumerReject},
		&packet.DREQ{LocalCommID: 9, RemoteCommID: 10, RemoteQPN: 0x777777},
		&packet.DREP{LocalCommID: 11, RemoteCommID: 12},
	}
	var frames []capFrame
	for i, m := range msgs {
		mad := make([]byte, packet.MADSize)
		packet.EncodeCM(mad, 0x0102030405060700+uint64(i), m)
		h := packet.Headers{BTH: packet.BTHFields{Opcode: packet.UDSendOnly, PKey: packet.DefaultPKey, DestQP: packet.GSIQPN, PSN: packet.PSN(i)},
			DETH: packet.DETHFields{QKey: packet.GSIQKey, SrcQP: packet.GSIQPN}}
		b := gsoFrame(t, cutTestPH, []gsoSegment{{h, mad}}, func(int) uint16 { return 1 })
		frames = append(frames, capFrame{b, gopacket.CaptureInfo{Timestamp: time.Unix(1700000000+int64(i), 0), CaptureLength: len(b), Length: len(b)}})
	}
	return writeFile(t, "cm.pcap", pcapBytes(1, frames))
}

// TestDumpAgreesWithTshark has Wireshark judge rxectl dump on the real
// captures (hardware NICs, kernel rxe), the scapy fixture, rxectl's own
// lossy captures and a capture of every CM message tshark 4.0 dissects:
// every frame tshark dissects as InfiniBand is a RoCEv2 packet of dump's
// (and the other way round, but for the frames dump calls MALFORMED),
// with the same BTH fields, extension-header fields and ICRC (the wire
// bytes; tshark shows them big-endian), and for a CM MAD the same
// attribute, transaction ID and the message fields dump prints. FLUSH,
// ATOMIC WRITE and CNP are unknown opcodes to tshark 4.0, which then
// shows no header after the BTH.
func TestDumpAgreesWithTshark(t *testing.T) {
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Skip("tshark not installed (Debian: apt-get install tshark); CI installs it")
	}
	tsharkUnknown := map[string]bool{"RC_FLUSH": true, "RC_ATOMIC_WRITE": true, "CNP": true}
	files := []struct {
		path string
		args []string
	}{
		{rdmacmPcap, nil}, {udPcap, nil}, {"../../../../testdata/captures/kernel-rxe_uc_write_64KiB.pcap", nil},
		{cx4Pcap, nil}, {scapyPcap, nil},
		// The Huawei NIC's UDP source ports are 69 and 72: tshark
		// decodes them as TFTP unless told otherwise.
		{huaweiPcap, []string{"-d", "udp.port==69,infiniband", "-d", "udp.port==72,infiniband"}},
		{"../flows/testdata/corrupt.pcap", nil}, {"../flows/testdata/read_reorder.pcap", nil},
		{"../ladder/testdata/read_lossy.pcap", nil},
		{cmCapture(t), nil},
	}
	cmFrames := 0
	for _, file := range files {
		t.Run(file.path, func(t *testing.T) {
			ts := runTsharkFields(t, tshark, file.path, file.args...)
			out, errs, code := runCmd(t, "dump", "--json", file.path)
			require.Equal(t, cli.ExitOK, code, errs)
			text, _, _ := runCmd(t, "dump", file.path)
			lines := map[int]string{}
			for _, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
				n, err := strconv.Atoi(strings.Fields(l)[0])
				require.NoError(t, err, "line %q", l)
				lines[n] = l
			}
			seen := map[int]bool{}
			for _, m := range decodeJSONLines(t, out) {
				n := frameNum(t, m)
				_, segment := m["segment"]
				require.False(t, segment, "frame %d: tshark does not split datagrams", n)
				seen[n] = true
				w, ok := ts[n]
				if _, malformed := m["error"]; malformed {
					continue
				}
				require.True(t, ok, "frame %d: tshark does not dissect it as InfiniBand", n)
				judgeFrame(t, n, m, w, lines[n], tsharkUnknown[m["opcode"].(string)])
				if w["infiniband.mad.mgmtclass"] == fmt.Sprintf("0x%02x", packet.MgmtClassCM) {
					cmFrames++
				}
			}
			for n := range ts {
				require.True(t, seen[n], "frame %d: tshark dissects it as InfiniBand, dump skips it", n)
			}
		})
	}
	// The 10 MADs of the rdma_cm capture and the 6 of cmCapture.
	require.Equal(t, 16, cmFrames)
}

// judgeFrame compares frame n's JSON object m and text line with tshark's
// fields w. unknown: tshark does not know the opcode.
func judgeFrame(t *testing.T, n int, m map[string]any, w map[string]string, line string, unknown bool) {
	t.Helper()
	num := func(s string) uint64 {
		t.Helper()
		v, err := strconv.ParseUint(s, 0, 64)
		require.NoError(t, err, "frame %d: tshark value %q", n, s)
		return v
	}
	hexBytes := func(s string) uint64 {
		t.Helper()
		v, err := strconv.ParseUint(strings.ReplaceAll(s, ":", ""), 16, 64)
		require.NoError(t, err, "frame %d: tshark bytes %q", n, s)
		return v
	}
	flag := func(s string) bool { return s == "1" || s == "True" }
	jnum := func(v any) uint64 {
		t.Helper()
		s, ok := v.(json.Number)
		require.True(t, ok, "frame %d: %v is not a number", n, v)
		u, err := strconv.ParseUint(string(s), 10, 64)
		require.NoError(t, err, "frame %d", n)
		return u
	}
	require.Equal(t, num(w["infiniband.bth.opcode"]), jnum(m["opcode_num"]), "frame %d opcode", n)
	require.Equal(t, flag(w["infiniband.bth.se"]), m["se"], "frame %d SE", n)
	require.Equal(t, flag(w["infiniband.bth.m"]), m["migreq"], "frame %d MigReq", n)
	require.Equal(t, num(w["infiniband.bth.padcnt"]), jnum(m["pad"]), "frame %d pad", n)
	require.Equal(t, num(w["infiniband.bth.tver"]), jnum(m["tver"]), "frame %d TVer", n)
	require.Equal(t, num(w["infiniband.bth.p_key"]), jnum(m["pkey"]), "frame %d P_Key", n)
	require.Equal(t, num(w["infiniband.bth.destqp"]), jnum(m["dqpn"]), "frame %d QPN", n)
	require.Equal(t, flag(w["infiniband.bth.a"]), m["ackreq"], "frame %d AckReq", n)
	require.Equal(t, num(w["infiniband.bth.psn"]), jnum(m["psn"]), "frame %d PSN", n)

	obj := func(k string) map[string]any {
		o, _ := m[k].(map[string]any)
		return o
	}
	// Each header tshark shows, dump shows with the same values, and
	// the other way round unless tshark does not know the opcode.
	headers := []struct {
		key    string
		ts     string
		fields [][2]string // JSON key in the header's object, tshark field
	}{
		{"reth", "infiniband.reth.va", [][2]string{{"va", "infiniband.reth.va"}, {"rkey", "infiniband.reth.r_key"}, {"dma_len", "infiniband.reth.dmalen"}}},
		{"deth", "infiniband.deth.q_key", [][2]string{{"qkey", "infiniband.deth.q_key"}, {"src_qp", "infiniband.deth.srcqp"}}},
		{"aeth", "infiniband.aeth.syndrome", [][2]string{{"syndrome", "infiniband.aeth.syndrome"}, {"msn", "infiniband.aeth.msn"}}},
		{"atomiceth", "infiniband.atomiceth.swapdt", [][2]string{{"va", "infiniband.reth.va"}, {"rkey", "infiniband.reth.r_key"},
			{"swap_add", "infiniband.atomiceth.swapdt"}, {"compare", "infiniband.atomiceth.cmpdt"}}},
		{"atomicacketh", "infiniband.atomicacketh.origremdt", [][2]string{{"orig", "infiniband.atomicacketh.origremdt"}}},
	}
	for _, h := range headers {
		if w[h.ts] == "" {
			if !unknown && h.key != "reth" { // an AtomicETH's VA and R_Key are tshark's RETH fields
				require.Nil(t, m[h.key], "frame %d: dump shows a %s tshark does not", n, h.key)
			}
			continue
		}
		if h.key == "reth" && obj("reth") == nil {
			require.NotNil(t, obj("atomiceth"), "frame %d: tshark shows a RETH", n)
			continue
		}
		o := obj(h.key)
		require.NotNil(t, o, "frame %d: tshark shows a %s, dump does not", n, h.key)
		for _, f := range h.fields {
			require.Equal(t, num(w[f[1]]), jnum(o[f[0]]), "frame %d %s.%s", n, h.key, f[0])
		}
	}
	for _, h := range [][2]string{{"immdt", "infiniband.immdt"}, {"ieth", "infiniband.ieth"}} {
		if w[h[1]] == "" {
			if !unknown {
				require.Nil(t, m[h[0]], "frame %d: dump shows a %s tshark does not", n, h[0])
			}
			continue
		}
		require.Equal(t, hexBytes(w[h[1]]), jnum(m[h[0]]), "frame %d %s", n, h[0])
	}
	switch {
	case unknown:
	case w["infiniband.invariant.crc"] == "":
		// tshark 4.0 shows no ICRC after a QP1 payload that is no
		// whole MAD.
		require.Equal(t, uint64(packet.GSIQPN), jnum(m["dqpn"]), "frame %d: tshark shows no ICRC", n)
	default:
		// tshark shows the four ICRC bytes as a big-endian number; dump
		// gives the CRC value, which the wire holds little-endian.
		crc := uint32(num(w["infiniband.invariant.crc"]))
		wire := crc>>24 | crc>>8&0xFF00 | crc<<8&0xFF0000 | crc<<24
		require.Equal(t, uint64(wire), jnum(m["icrc"]), "frame %d ICRC", n)
	}
	if w["infiniband.mad.mgmtclass"] != "" && num(w["infiniband.mad.mgmtclass"]) == packet.MgmtClassCM {
		require.Contains(t, line, cmWant(t, w, num), "frame %d: the CM MAD", n)
	}
}

// cmWant is what dump's line says of the CM MAD whose tshark fields are w.
func cmWant(t *testing.T, w map[string]string, num func(string) uint64) string {
	t.Helper()
	attr := packet.CMAttr(num(w["infiniband.mad.attributeid"]))
	s := fmt.Sprintf(" cm=%v tid=0x%016x", attr, num(w["infiniband.mad.transactionid"]))
	ids := func(local, remote string) string {
		return fmt.Sprintf(" lcid=0x%08x rcid=0x%08x", num(w[local]), num(w[remote]))
	}
	switch attr {
	case packet.AttrREQ:
		// The path MTU code: 1 to 5 are 256 to 4096 bytes.
		s += fmt.Sprintf(" lcid=0x%08x sid=0x%016x", num(w["infiniband.cm.req"]), num(w["infiniband.cm.req.serviceid"]))
		s += fmt.Sprintf(" (tcp:%d) qpn=0x%06x spsn=%d mtu=%d retry=%d rnr_retry=%d ack_timeout=%d ip=%s:%d→%s",
			num(w["infiniband.cm.req.serviceid"])&0xFFFF, num(w["infiniband.cm.req.localqpn"]), num(w["infiniband.cm.req.startpsn"]),
			128<<num(w["infiniband.cm.req.pppmtu"]), num(w["infiniband.cm.req.retrcount"]), num(w["infiniband.cm.req.rnrretrcount"]),
			num(w["infiniband.cm.req.prim_localacktout"]), w["infiniband.cm.req.ip_cm.sip4"], num(w["infiniband.cm.req.ip_cm.sport"]),
			w["infiniband.cm.req.ip_cm.dip4"])
	case packet.AttrREP:
		s += ids("infiniband.cm.rep", "infiniband.cm.rep.remotecommid")
		s += fmt.Sprintf(" qpn=0x%06x spsn=%d rnr_retry=%d", num(w["infiniband.cm.rep.localqpn"]), num(w["infiniband.cm.rep.startpsn"]),
			num(w["infiniband.cm.rep.rnrretrcount"]))
	case packet.AttrRTU:
		s += ids("infiniband.cm.rtu.localcommid", "infiniband.cm.rtu.remotecommid")
	case packet.AttrREJ:
		s += ids("infiniband.cm.rej.localcommid", "infiniband.cm.rej.remotecommid")
		return s + fmt.Sprintf(" reason=%d (", num(w["infiniband.cm.rej.reason"]))
	case packet.AttrDREQ:
		s += ids("infiniband.cm.dreq.localcommid", "infiniband.cm.dreq.remotecommid")
		s += fmt.Sprintf(" rqpn=0x%06x", num(w["infiniband.cm.req.remoteqpneecn"]))
	case packet.AttrDREP:
		s += ids("infiniband.cm.drsp.localcommid", "infiniband.cm.drsp.remotecommid")
	default:
		require.Failf(t, "CM attribute", "tshark dissects a %v the test does not know", attr)
	}
	return s + " "
}
