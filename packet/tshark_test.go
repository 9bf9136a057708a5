package packet

import (
	"bytes"
	"context"
	"math/bits"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// tsharkCaptureFields are the fields TestCapturesTshark compares, with
// tshark 4.0's names (tshark -G fields).
var tsharkCaptureFields = []string{
	"frame.number", "infiniband.bth.opcode", "infiniband.bth.se", "infiniband.bth.m", "infiniband.bth.padcnt",
	"infiniband.bth.tver", "infiniband.bth.p_key", "infiniband.bth.destqp", "infiniband.bth.a", "infiniband.bth.psn",
	"infiniband.deth.q_key", "infiniband.deth.srcqp", "infiniband.reth.va", "infiniband.reth.r_key",
	"infiniband.reth.dmalen", "infiniband.aeth.syndrome", "infiniband.aeth.msn", "infiniband.immdt",
	"infiniband.invariant.crc",
}

// TestCapturesTshark has Wireshark decode every RoCEv2 packet of the real
// captures and requires Parse to find the same opcode, BTH fields (SE,
// MigReq, PadCnt, TVer, P_Key, DestQP, AckReq, PSN), DETH, RETH, AETH and
// ImmDt values, and ICRC, and the same set of headers, for every packet
// whose opcode tshark 4.0 knows (it does not know the CNP).
func TestCapturesTshark(t *testing.T) {
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Skip("tshark not installed")
	}
	files := map[string]int{ // RoCEv2 packets in each (TestCaptures)
		"huawei_hiroce_oferby_proxy.pcap": 105, "scapy_uts_cx4lx_cnp_and_uc_example.pcap": 2,
		"kernel-rxe_rdmacm_send_4KiB.pcap": 154, "kernel-rxe_ud_send_512B.pcap": 20, "kernel-rxe_uc_write_64KiB.pcap": 640,
	}
	for file, roce := range files {
		t.Run(file, func(t *testing.T) {
			path := "../testdata/captures/" + file
			// The Huawei capture's UDP source ports 69 and 72 would
			// otherwise make tshark dissect TFTP; RPC over RDMA's heuristic
			// would claim some SENDs.
			args := []string{"-r", path, "-d", "udp.port==69,infiniband", "-d", "udp.port==72,infiniband",
				"--disable-heuristic", "rpcrdma_infiniband", "-Y", "udp.dstport==4791",
				"-T", "fields", "-E", "separator=/t", "-E", "occurrence=f"}
			for _, f := range tsharkCaptureFields {
				args = append(args, "-e", f)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			var stderr bytes.Buffer
			cmd := exec.CommandContext(ctx, tshark, args...)
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			require.NoError(t, err, "tshark %s\n%s", strings.Join(args, " "), stderr.String())

			frames := readPcap(t, path)
			n := 0
			for line := range strings.Lines(string(out)) {
				got := map[string]string{}
				for j, v := range strings.Split(strings.TrimRight(line, "\n"), "\t") {
					if v != "" {
						got[tsharkCaptureFields[j]] = v
					}
				}
				num, err := strconv.Atoi(got["frame.number"])
				require.NoError(t, err, line)
				d, err := ParseIP(etherIP(frames[num-1]))
				require.NoError(t, err, "frame %d", num)
				p, err := Parse(d.Payload)
				require.NoError(t, err, "frame %d", num)
				n++
				compareTshark(t, num, p, got)
			}
			require.Equal(t, roce, n)
		})
	}
}

// compareTshark requires tshark's fields got of frame num to show p.
func compareTshark(t *testing.T, num int, p Packet, got map[string]string) {
	t.Helper()
	b := p.BTH()
	bit := func(v bool) uint64 {
		if v {
			return 1
		}
		return 0
	}
	want := map[string]uint64{
		"infiniband.bth.opcode": uint64(p.Opcode()), "infiniband.bth.se": bit(b.SE()),
		"infiniband.bth.m": bit(b.MigReq()), "infiniband.bth.padcnt": uint64(b.PadCnt()),
		"infiniband.bth.tver": uint64(b.TVer()), "infiniband.bth.p_key": uint64(b.PKey()),
		"infiniband.bth.destqp": uint64(b.DestQP()), "infiniband.bth.a": bit(b.AckReq()),
		"infiniband.bth.psn": uint64(b.PSN()),
	}
	known := p.Opcode() != CNP // tshark 4.0 dissects no header after a CNP's BTH
	if known {
		// tshark reads the ICRC big-endian; Packet.ICRC is the CRC value.
		want["infiniband.invariant.crc"] = uint64(bits.ReverseBytes32(p.ICRC()))
		if d := p.DETH(); d != nil {
			want["infiniband.deth.q_key"] = uint64(d.QKey())
			want["infiniband.deth.srcqp"] = uint64(d.SrcQP())
		}
		if r := p.RETH(); r != nil {
			want["infiniband.reth.va"] = r.VA()
			want["infiniband.reth.r_key"] = uint64(r.RKey())
			want["infiniband.reth.dmalen"] = uint64(r.DMALen())
		}
		if a := p.AETH(); a != nil {
			want["infiniband.aeth.syndrome"] = uint64(a.Syndrome())
			want["infiniband.aeth.msn"] = uint64(a.MSN())
		}
		if i := p.ImmDt(); i != nil {
			want["infiniband.immdt"] = uint64(i.Imm())
		}
	}
	for _, f := range tsharkCaptureFields[1:] {
		v, ok := got[f]
		w, wok := want[f]
		if !known && !wok {
			continue
		}
		require.Equal(t, wok, ok, "frame %d (%v): tshark has %s=%q", num, p.Opcode(), f, v)
		if !ok {
			continue
		}
		if f == "infiniband.immdt" { // shown as bytes
			v = "0x" + v
		}
		n, err := strconv.ParseUint(v, 0, 64)
		require.NoError(t, err, "frame %d: %s=%q", num, f, v)
		require.Equal(t, w, n, "frame %d (%v): %s", num, p.Opcode(), f)
	}
}
