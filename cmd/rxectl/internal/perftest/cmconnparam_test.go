package perftest

import (
	"context"
	"net/netip"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
	"github.com/gorxe/gorxe/internal/syncbuf"
	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/packet"
	"github.com/gorxe/gorxe/rxe"
)

// TestRDMACMExchangeFirstSendNoRNR: the first SEND of an -R exchange (the
// client's version message, sent as soon as its Dial returns) finds the
// server's receive posted, as perftest's, whose rdma_server_connect posts
// it before rdma_accept: no RNR NAK. The server here holds its end
// until that SEND has reached its QP and been answered (a receive
// completed, or an RNR NAK sent), so the order does not depend on the
// scheduling of the two ends; the client's capture of the whole run
// (a WRITE test: no SEND but the exchange's) holds no RNR NAK either.
func TestRDMACMExchangeFirstSendNoRNR(t *testing.T) {
	port := sharedUDPPort(t)
	pcap := filepath.Join(t.TempDir(), "cm.pcap")
	common := []string{"-R", "--udp-port", port, "-n", "20", "-s", "64", "--gso=off"}
	var rnr, recvs uint64
	var waitErr error
	_, _, serr, cerr := runCMEndsWith(t, "write-bw", "write-bw",
		append([]string{"--bind", "127.0.0.1"}, common...),
		append([]string{"127.0.0.1", "--bind", "127.0.0.2", "--pcap", pcap}, common...),
		func(so, _ *options) {
			so.hooks.cmExchangeUp = func(c *rxe.CMConn) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				for ctx.Err() == nil {
					r := c.QP.Counters().Responder
					if rnr, recvs = r.SendRNRErr, r.RDMARecvs; rnr+recvs > 0 {
						return
					}
					time.Sleep(time.Millisecond)
				}
				waitErr = ctx.Err()
			}
		})
	require.NoError(t, cerr)
	require.NoError(t, serr)
	require.NoError(t, waitErr, "the client's first SEND never reached the server's QP")
	require.Zero(t, rnr, "RNR NAKs sent for the exchange's first SEND")
	require.Equal(t, uint64(1), recvs, "the first SEND completed a receive")
	require.Zero(t, capturedRNRNAKs(t, pcap), "RNR NAKs in the run")
}

// capturedRNRNAKs counts the RNR NAKs of an IPv4 capture file: RC
// ACKNOWLEDGE packets whose AETH syndrome is an RNR NAK.
func capturedRNRNAKs(t *testing.T, file string) int {
	t.Helper()
	n := 0
	for _, frame := range pcapFrames(t, file) {
		// Ethernet, IPv4, UDP, then the BTH (12 bytes) and the AETH.
		const bth = 14 + 20 + 8
		if len(frame) >= bth+16 && frame[bth] == byte(packet.RCAcknowledge) && packet.Syndrome(frame[bth+12]).IsRNR() {
			n++
		}
	}
	return n
}

// TestRDMACMConnParamDepths: the responder resources and initiator depth
// of -R's REQs and REPs are perftest's rdma_conn_param: 0/0 on the
// exchange's connection (perftest's comm context is a SEND test with no
// outstanding reads) and on the test QPs' of WRITE and SEND tests;
// out_reads both ways on the test QPs' of READ and atomic tests, the
// server answering the smaller of its own and the REQ's
// (rdma_cm_connection_request_handler). The 0/0 connections run: the
// test completes, its QPs having max_rd_atomic and max_dest_rd_atomic 0.
func TestRDMACMConnParamDepths(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cmd   string
		extra []string
		depth uint8 // the test QP's REQ and REP, both fields
	}{
		{"write-bw", nil, 0},
		{"send-bw", nil, 0},
		{"write-lat", nil, 0},
		{"send-lat", nil, 0},
		{"read-bw", []string{"-o", "4"}, 4},
		{"read-lat", nil, 128}, // the device's max_qp_rd_atom
		{"atomic-bw", []string{"-o", "2"}, 2},
	} {
		t.Run(tc.cmd, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "cm.pcap")
			args := append([]string{tc.cmd, "-R", "--loopback", "--udp-port", "0", "-n", "20", "--pcap", file}, tc.extra...)
			out, errs, code := runCmd(t, args...)
			require.Equal(t, cli.ExitOK, code, errs)
			require.Regexp(t, regexp.MustCompile(`(?m)^ \d+\s+20\s+\d`), out)
			var reqs, reps [][2]uint8
			for _, m := range capturedCMMADs(t, file) {
				switch m.attr {
				case packet.AttrREQ:
					var req packet.REQ
					require.NoError(t, req.Decode(m.msg))
					reqs = append(reqs, [2]uint8{req.ResponderResources, req.InitiatorDepth})
				case packet.AttrREP:
					var rep packet.REP
					require.NoError(t, rep.Decode(m.msg))
					reps = append(reps, [2]uint8{rep.ResponderResources, rep.InitiatorDepth})
				}
			}
			want := [][2]uint8{{0, 0}, {tc.depth, tc.depth}} // the exchange's, the test QP's
			require.Equal(t, want, reqs, "the REQs' responder resources and initiator depth")
			require.Equal(t, want, reps, "the REPs' responder resources and initiator depth")
		})
	}
}

// TestRDMACMServerRefusesStranger: a third host whose rdma_cm request
// reaches an -R server while it listens for its client's test QPs (the
// window between its listen and its accepts) is refused (a REJ, consumer
// reject), not accepted with the options the server learned from its
// client (selective repeat, which a kernel-rxe or librdmacm peer does not
// know, and its receive buffer) nor in place of one of the client's test
// QPs; the test between the server and its client runs as without it.
// The server here waits, before telling its client that it listens,
// until the stranger's REQ has reached it, so that request comes first.
func TestRDMACMServerRefusesStranger(t *testing.T) {
	port := sharedUDPPort(t)
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	conn, err := netdev.ListenUDP(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.3"), uint16(p)), netdev.Options{})
	require.NoError(t, err)
	stranger, err := rxe.Open(conn, rxe.Options{Name: "stranger", OwnConn: true})
	require.NoError(t, err)
	defer stranger.Close()
	pd, err := stranger.AllocPD()
	require.NoError(t, err)
	cq, err := stranger.CreateCQ(16, -1)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type dialed struct {
		c   *rxe.CMConn
		err error
	}
	res := make(chan dialed, 1)
	var notes syncbuf.Buffer
	common := []string{"-R", "--udp-port", port, "-n", "20", "-s", "64"}
	srvOut, cliOut, serr, cerr := runCMEndsWith(t, "write-bw", "write-bw",
		append([]string{"--bind", "127.0.0.1"}, common...),
		append([]string{"127.0.0.1", "--bind", "127.0.0.2"}, common...),
		func(so, _ *options) {
			so.stderr = &notes
			so.hooks.cmListening = func(d *rxe.Device) {
				before := d.GSICounters().RcvdMADs
				go func() {
					c, err := rxe.Dial(ctx, stranger, "127.0.0.1:18515", rxe.CMOptions{PD: pd, SendCQ: cq})
					res <- dialed{c, err}
				}()
				for ctx.Err() == nil && d.GSICounters().RcvdMADs == before {
					time.Sleep(time.Millisecond)
				}
			}
		})
	require.NoError(t, cerr, cliOut)
	require.NoError(t, serr, srvOut)
	var r dialed
	select {
	case r = <-res:
	case <-ctx.Done():
		t.Fatal("the stranger's Dial got no answer")
	}
	if r.c != nil {
		t.Fatalf("the stranger was accepted (selective repeat %v)", r.c.QP.Query().SelectiveRepeat)
	}
	var rej *rxe.RejectError
	require.ErrorAs(t, r.err, &rej)
	require.Equal(t, packet.RejConsumerReject, rej.Reason)
	require.Contains(t, notes.String(), " Refused an rdma_cm connection request from 127.0.0.3:")
	for _, out := range []string{srvOut, cliOut} {
		require.Regexp(t, regexp.MustCompile(`(?m)^ 64\s+20\s+\d`), out)
	}
}
