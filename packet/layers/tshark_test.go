package layers

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	gplayers "github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/packet"
)

// tsharkFields are the fields TestTsharkDissects asks tshark for
// (tshark -G fields lists them; these are tshark 4.0's names).
var tsharkFields = []string{
	"frame.number", "_ws.malformed", "udp.checksum.status", "ip.checksum.status",
	"infiniband.bth.opcode", "infiniband.bth.se", "infiniband.bth.m", "infiniband.bth.padcnt", "infiniband.bth.tver",
	"infiniband.bth.p_key", "infiniband.bth.destqp", "infiniband.bth.a", "infiniband.bth.psn",
	"infiniband.rdeth.eecnxt", "infiniband.deth.q_key", "infiniband.deth.srcqp",
	"infiniband.reth.va", "infiniband.reth.r_key", "infiniband.reth.dmalen",
	"infiniband.atomiceth.swapdt", "infiniband.atomiceth.cmpdt",
	"infiniband.aeth.syndrome", "infiniband.aeth.msn", "infiniband.atomicacketh.origremdt",
	"infiniband.immdt", "infiniband.ieth", "infiniband.invariant.crc",
}

// tsharkUnknown are the opcodes tshark 4.0 shows as "Unknown OpCode": it
// dissects their BTH and nothing after it.
var tsharkUnknown = map[packet.Opcode]bool{packet.RCFlush: true, packet.RCAtomicWrite: true, packet.CNP: true}

// TestTsharkDissects has Wireshark judge our encoder: a pcap of packets of
// every RC, UC and UD opcode and CNP, with every pad count, over IPv4 and IPv6 with real UDP
// checksums, built with gopacket.SerializeLayers and FixICRC. tshark must
// dissect every frame as InfiniBand with our opcode, flag none as
// malformed, find the IP and UDP checksums good, and report our values for
// every header field it decodes, and our ICRC.
func TestTsharkDissects(t *testing.T) {
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Skip("tshark not installed; CI installs it")
	}
	type frame struct {
		s  sample
		h  packet.Headers // as sent (pad count filled in)
		ip int
	}
	var frames []frame
	var pcap bytes.Buffer
	w := pcapgo.NewWriter(&pcap)
	require.NoError(t, w.WriteFileHeader(65535, gplayers.LinkTypeEthernet))
	for i, ph := range []*packet.PseudoHeader{&ph4, &ph6} {
		for _, s := range samples(i) {
			if s.h.BTH.Opcode.Transport() == packet.TransportRD {
				// Not a RoCE transport. tshark 4.0.17 reads the RD extension
				// headers 8 bytes further on than IBA 9.2 puts them (BTH,
				// RDETH, DETH), so it is no judge of them.
				continue
			}
			b := buildFrame(t, ph, &s.h, s.payload, true)
			ci := gopacket.CaptureInfo{Timestamp: time.Unix(1700000000, 0).Add(time.Duration(len(frames)) * time.Millisecond),
				CaptureLength: len(b), Length: len(b)}
			require.NoError(t, w.WritePacket(ci, b))
			h := s.h
			h.BTH.PadCnt = uint8(packet.PadLen(len(s.payload)))
			frames = append(frames, frame{s, h, 4 + 2*i})
		}
	}
	file := filepath.Join(t.TempDir(), "gorxe.pcap")
	require.NoError(t, os.WriteFile(file, pcap.Bytes(), 0o644))

	args := []string{"-r", file, "--disable-heuristic", "rpcrdma_infiniband",
		"-o", "udp.check_checksum:TRUE", "-o", "ip.check_checksum:TRUE",
		"-T", "fields", "-E", "separator=/t", "-E", "occurrence=f"}
	for _, f := range tsharkFields {
		args = append(args, "-e", f)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, tshark, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "tshark %s\n%s", strings.Join(args, " "), stderr.String())
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	require.Len(t, lines, len(frames))

	for i, line := range lines {
		f := frames[i]
		got := map[string]string{}
		for j, v := range strings.Split(line, "\t") {
			got[tsharkFields[j]] = v
		}
		h := &f.h
		op := h.BTH.Opcode
		info := op.Info()
		name := "IPv" + strconv.Itoa(f.ip) + " " + f.s.name
		num := func(field string) uint64 {
			t.Helper()
			v, ok := got[field]
			require.True(t, ok && v != "", "%s: tshark has no %s", name, field)
			if field == "infiniband.immdt" || field == "infiniband.ieth" { // shown as bytes
				v = "0x" + v
			}
			n, err := strconv.ParseUint(v, 0, 64)
			require.NoError(t, err, "%s: %s=%q", name, field, v)
			return n
		}
		bit := func(b bool) uint64 {
			if b {
				return 1
			}
			return 0
		}
		require.Equal(t, strconv.Itoa(i+1), got["frame.number"])
		require.Empty(t, got["_ws.malformed"], "%s: malformed", name)
		require.Equal(t, uint64(1), num("udp.checksum.status"), "%s: UDP checksum good", name)
		if f.ip == 4 {
			require.Equal(t, uint64(1), num("ip.checksum.status"), "%s: IP checksum good", name)
		}
		want := map[string]uint64{
			"infiniband.bth.opcode": uint64(op), "infiniband.bth.se": bit(h.BTH.SE), "infiniband.bth.m": bit(h.BTH.MigReq),
			"infiniband.bth.padcnt": uint64(h.BTH.PadCnt), "infiniband.bth.tver": 0, "infiniband.bth.p_key": uint64(h.BTH.PKey),
			"infiniband.bth.destqp": uint64(h.BTH.DestQP), "infiniband.bth.a": bit(h.BTH.AckReq), "infiniband.bth.psn": uint64(h.BTH.PSN),
		}
		if !tsharkUnknown[op] {
			if info.Has(packet.HdrRDETH) {
				want["infiniband.rdeth.eecnxt"] = uint64(h.RDETH)
			}
			if info.Has(packet.HdrDETH) {
				want["infiniband.deth.q_key"] = uint64(h.DETH.QKey)
				want["infiniband.deth.srcqp"] = uint64(h.DETH.SrcQP)
			}
			if info.Has(packet.HdrRETH) {
				want["infiniband.reth.va"] = h.RETH.VA
				want["infiniband.reth.r_key"] = uint64(h.RETH.RKey)
				want["infiniband.reth.dmalen"] = uint64(h.RETH.DMALen)
			}
			if info.Has(packet.HdrAtomicETH) { // tshark names its VA and R_Key as the RETH's
				want["infiniband.reth.va"] = h.AtomicETH.VA
				want["infiniband.reth.r_key"] = uint64(h.AtomicETH.RKey)
				want["infiniband.atomiceth.swapdt"] = h.AtomicETH.SwapAdd
				want["infiniband.atomiceth.cmpdt"] = h.AtomicETH.Compare
			}
			if info.Has(packet.HdrAETH) {
				want["infiniband.aeth.syndrome"] = uint64(h.AETH.Syndrome)
				want["infiniband.aeth.msn"] = uint64(h.AETH.MSN)
			}
			if info.Has(packet.HdrAtomicAckETH) {
				want["infiniband.atomicacketh.origremdt"] = h.AtomicAck
			}
			if info.Has(packet.HdrImmDt) {
				want["infiniband.immdt"] = uint64(h.Imm)
			}
			if info.Has(packet.HdrIETH) {
				want["infiniband.ieth"] = uint64(h.IETH)
			}
			// tshark reads the ICRC big-endian; we keep the CRC value.
			buf := make([]byte, 2048)
			ph := map[int]*packet.PseudoHeader{4: &ph4, 6: &ph6}[f.ip]
			n, err := packet.Build(buf, &f.s.h, f.s.payload, ph)
			require.NoError(t, err)
			want["infiniband.invariant.crc"] = uint64(binary.BigEndian.Uint32(buf[n-4:]))
		}
		for field, v := range want {
			require.Equal(t, v, num(field), "%s: %s", name, field)
		}
	}
}
