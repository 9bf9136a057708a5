package perftest

import (
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPerVectorSockets checks that each end opens one socket per
// completion vector and that with -q 2 and -q 4 more than one of them
// receives datagrams: the QPs spread over the vectors are received by as
// many sockets (and receive goroutines).
func TestPerVectorSockets(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("GOMAXPROCS 1: the device has one completion vector")
	}
	for _, q := range []int{2, 4} {
		t.Run("q"+strconv.Itoa(q), func(t *testing.T) {
			cs, ss := loopbackSessions(t, "write-bw", "-q", strconv.Itoa(q), "-s", "4096", "-n", "200", "-u", "20")
			for _, s := range []*session{cs, ss} {
				require.Len(t, s.socks, runtime.GOMAXPROCS(0))
				busy := 0
				for _, c := range s.socks {
					if c.Stats().PacketsReceived > 0 {
						busy++
					}
				}
				require.Greater(t, busy, 1, "sockets that received datagrams")
			}
		})
	}
}

// TestPerVectorSocketsCaptureAndFaults: with -q 2 the capture holds the
// traffic of every socket in one file (one record per datagram the
// sockets sent and received, decodable, both QPs in it) and the fault
// injection (receive drops, so the capture holds every datagram sent)
// acts on every socket, its counts summed in the report.
func TestPerVectorSocketsCaptureAndFaults(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("GOMAXPROCS 1: the device has one completion vector")
	}
	t.Parallel()
	file := filepath.Join(t.TempDir(), "q2.pcap")
	r := runJSON(t, "write-bw", "-q", "2", "-n", "200", "-s", "4096", "-u", "20", "--pcap", file, "--drop=0.01,dir=recv")
	require.Len(t, r.Results, 1)
	require.Equal(t, uint64(400), r.Results[0].Iters)
	require.NotNil(t, r.Capture)
	require.Empty(t, r.Capture.Error)
	require.Equal(t, r.Device.SentPkts, r.Capture.Sent, "every datagram the device sent, from both sockets")
	require.Positive(t, r.Capture.Received)
	require.NotNil(t, r.Faults)
	require.Positive(t, r.Faults.Recv.Dropped)
	pkts := dumpPackets(t, r.Capture)
	require.Len(t, pkts, int(r.Capture.Sent+r.Capture.Received))
	qps := map[any]bool{}
	for _, p := range pkts {
		qps[p["dqpn"]] = true
	}
	require.GreaterOrEqual(t, len(qps), 2, "destination QPs in the capture")
}

// TestAnnouncedSockets: each end announces in its exchange of versions the
// receive sockets it opened (one per completion vector), over TCP and over
// rdma_cm (-R), and the other end learns that count. The test runs with
// at least two vectors, so that one socket is not the right answer.
func TestAnnouncedSockets(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	}
	for _, tc := range []struct {
		name string
		open func(*testing.T, string, ...string) (*session, *session)
	}{{"tcp", loopbackSessions}, {"rdma_cm", loopbackCMSessions}} {
		t.Run(tc.name, func(t *testing.T) {
			cs, ss := tc.open(t, "write-bw", "-q", "2", "-s", "4096", "-n", "20")
			for _, s := range []*session{cs, ss} {
				require.Len(t, s.socks, runtime.GOMAXPROCS(0))
			}
			require.Equal(t, len(ss.socks), cs.peer.RecvSockets, "the server's sockets, as the client learned them")
			require.Equal(t, len(cs.socks), ss.peer.RecvSockets, "the client's sockets, as the server learned them")
		})
	}
}
