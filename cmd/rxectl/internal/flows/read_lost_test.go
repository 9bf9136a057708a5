package flows

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/packet"
)

// TestLostReadRequestIsNoReread: a READ request lost before the capture
// point and sent again later has a PSN below the highest requested, yet no
// request in the capture asked for its span: its responses are a READ
// message of their own, while the re-reads of spans asked for before (a
// kernel-rxe re-read of the rest of a READ, a go-back-N resend of a later
// READ, a selective-repeat hole) are no new message.
func TestLostReadRequestIsNoReread(t *testing.T) {
	hole := packet.NAKSyndrome(packet.NAKSelectiveRepeat)
	rd := func(us int, psn, n uint32) pk {
		return pk{us: us, op: packet.RCRDMAReadRequest, psn: psn, dmaLen: n * 1024, ackReq: true}
	}
	resp := func(us int, op packet.Opcode, psn uint32) pk {
		return pk{us: us, fromB: true, op: op, psn: psn, payload: 1024, syn: ack}
	}
	nak := func(us int, psn uint32, syn packet.Syndrome) pk {
		return pk{us: us, fromB: true, op: packet.RCAcknowledge, psn: psn, syn: syn}
	}
	const (
		first, middle, last, only = packet.RCRDMAReadResponseFirst, packet.RCRDMAReadResponseMiddle,
			packet.RCRDMAReadResponseLast, packet.RCRDMAReadResponseOnly
	)
	for _, tc := range []struct {
		name          string
		ps            []pk
		reqs, answers int // request and READ response messages
	}{
		{"go-back-N, re-read of an earlier READ first", []pk{
			rd(0, 10, 2), rd(1, 14, 2), // PSNs 10..11, 14..15: the READ of 12..13 lost
			resp(5, first, 10), // 11 lost
			nak(6, 12, seqNAK), // the responder wanted 12, got 14
			rd(10, 11, 1),      // the rest of READ 10 (rxe req_retry)
			rd(11, 12, 2),      // the lost READ, first seen here
			rd(12, 14, 2),      // READ 14 again
			resp(15, only, 11), resp(16, first, 12), resp(17, last, 13), resp(18, first, 14), resp(19, last, 15),
		}, 3, 3},
		{"selective repeat, hole report", []pk{
			rd(0, 10, 2), rd(1, 14, 2), rd(2, 16, 2), // the READ of 12..13 lost
			nak(5, 12, hole),
			resp(5, first, 10), resp(6, last, 11),
			rd(10, 12, 2), // the lost READ, first seen here
			resp(15, first, 12), resp(16, last, 13), resp(17, first, 14), resp(18, last, 15),
			resp(19, first, 16), resp(20, last, 17),
		}, 4, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := analyse(build(t, tc.ps), Options{PMTU: 1024})
			require.Len(t, rep.Connections, 1)
			c := rep.Connections[0]
			req, res := c.Flows[0], c.Flows[1]
			require.Equal(t, tc.reqs, req.Messages, "%+v", req)
			require.Equal(t, tc.answers, res.Messages, "one per READ: %+v", res)
			require.Equal(t, []int{1, 2}, []int{req.PSNGaps, req.PSNMissing}, "the lost READ request")
			require.NotEmpty(t, c.Recoveries)
		})
	}
}
