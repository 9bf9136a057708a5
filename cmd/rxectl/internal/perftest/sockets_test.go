package perftest

import (
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/oob"
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

// TestSharedSocketWindows: a socket's receive buffer is shared by every
// QP whose packets it receives. With capped buffers (asked for without
// forcing, as a process without CAP_NET_ADMIN gets them on a stock
// kernel) and two sockets per end, the client QPs whose requests reach
// one of the server's sockets, and those whose responses reach one of the
// client's, start with PSN windows that together are no larger than the
// window of a lone QP (-q 1), the most one socket's buffer absorbs, and
// each is about its share of that window: rxectl passes the announced
// buffer and rxe divides it once, by the peer QPN each connection
// learned, over TCP and over rdma_cm alike.
func TestSharedSocketWindows(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2)) // two sockets per end
	socketRecvBuffer = 212992                       // a stock net.core.rmem_max
	defer func() { socketRecvBuffer = 0 }()
	for _, tc := range []struct {
		name string
		open func(*testing.T, func(*session), string, ...string) (*session, *session)
	}{{"tcp", loopbackSessionsHooked}, {"rdma_cm", loopbackCMSessionsHooked}} {
		t.Run(tc.name, func(t *testing.T) {
			run := func(q int) (cs, ss *session, windows []int) {
				connected := func(s *session) {
					if s.client {
						for _, qp := range s.qps {
							windows = append(windows, qp.Counters().Requester.Recovery.Window)
						}
					}
				}
				cs, ss = tc.open(t, connected, "write-bw", "-q", strconv.Itoa(q), "-s", "1048576", "-n", "20", "--no-force-buffers")
				require.Len(t, windows, q)
				return cs, ss, windows
			}
			_, _, lone := run(1)
			require.Less(t, lone[0], 128, "the test needs a window bound by the capped buffers")
			for _, q := range []int{2, 4} {
				cs, ss, windows := run(q)
				require.Len(t, ss.socks, 2)
				require.Len(t, cs.socks, 2)
				peerSock, ownSock := map[uint32]int{}, map[int]int{}
				peerQPs, ownQPs := map[uint32]int{}, map[int]int{}
				for i, w := range windows {
					peerSock[cs.rem[i].QPN%2] += w
					peerQPs[cs.rem[i].QPN%2]++
					_, rcq := cs.qpCQs(i)
					ownSock[rcq.Vector()] += w
					ownQPs[rcq.Vector()]++
				}
				// Divided once, by rxe: a QP sharing a socket with k-1
				// others gets about a k-th of a lone QP's window (less
				// than one PSN lost to rounding), not a k²-th.
				for i, w := range windows {
					_, rcq := cs.qpCQs(i)
					k := max(peerQPs[cs.rem[i].QPN%2], ownQPs[rcq.Vector()])
					require.GreaterOrEqual(t, w, lone[0]/k-1, "-q %d: QP %d, one of %d on a socket: its share, divided once", q, i, k)
				}
				var over uint64
				for _, c := range ss.socks {
					over += c.Stats().RecvOverflows
				}
				t.Logf("-q %d: windows %v (a lone QP's %d), server socket overflows %d, client retransmits %d",
					q, windows, lone[0], over, cs.final.Transport.Retransmits)
				for sock, w := range peerSock {
					require.LessOrEqual(t, w, lone[0], "-q %d: the windows of the QPs toward the server's socket %d", q, sock)
				}
				for vec, w := range ownSock {
					require.LessOrEqual(t, w, lone[0], "-q %d: the windows of the QPs on the client's socket %d", q, vec)
				}
			}
		})
	}
}

// TestPeerBufferShares: the test QPs are given the peer's announced
// buffer and socket count as announced, undivided (rxe divides them); a
// saturated count as 0, unknown; nothing when the peer announced nothing.
func TestPeerBufferShares(t *testing.T) {
	cs, _ := loopbackSessions(t, "write-bw", "-q", "4", "-s", "4096", "-n", "5")
	for _, tc := range []struct {
		name           string
		peer           oob.Offer
		bytes, sockets int
	}{
		{"nothing announced", oob.Offer{RecvSockets: 2}, 0, 0},
		{"two sockets", oob.Offer{RecvBuffer: 3 << 12, RecvSockets: 2}, 3 << 12, 2},
		{"one socket", oob.Offer{RecvBuffer: 4 << 12, RecvSockets: 1}, 4 << 12, 1},
		{"an older rxectl's 0 sockets", oob.Offer{RecvBuffer: 4 << 12}, 4 << 12, 0},
		{"saturated count", oob.Offer{RecvBuffer: 4 << 12, RecvSockets: oob.MaxRecvSockets}, 4 << 12, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs.peer.Offer = tc.peer
			bytes, sockets := cs.peerBuffer()
			require.Equal(t, []int{tc.bytes, tc.sockets}, []int{bytes, sockets})
		})
	}
}
