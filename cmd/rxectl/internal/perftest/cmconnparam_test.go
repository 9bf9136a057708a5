package perftest

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
