package perftest

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/report"
	"github.com/gorxe/gorxe/rxe"
)

// TestRecvPostListPosting: with --recv_post_list N the first receives go
// in whole lists within the depth, and a completed receive is posted
// again only once N are owed, as one list; rposted counts what the QP
// holds (a receive more than that overflows its queue of 16).
func TestRecvPostListPosting(t *testing.T) {
	s := latTestSession(t, "send-bw", false, false)
	s.o.recvPostList = 4
	s.o.size = 8
	toInit(t, s.qps[0])
	require.NoError(t, s.postRecvs(14))
	require.Equal(t, []int{12}, s.rposted, "three lists of 4 fit 14")
	for i := range 3 {
		s.rposted[0]-- // a receive completed (the QP still holds it here)
		require.NoError(t, s.postRecv(0))
		require.Equal(t, 11-i, s.rposted[0], "owed %d: not posted yet", i+1)
	}
	// The QP holds the 12 of the lists (its receives do not complete
	// here): 4 more fill its queue of 16, which posting each owed receive
	// at once would have overflowed.
	require.NoError(t, s.postRecvList(0, 4))
	require.Equal(t, 13, s.rposted[0])
	// The fourth owed posts a list of 4, which no longer fits.
	s.rposted[0]--
	require.ErrorContains(t, s.postRecv(0), "receive queue full")
	require.Zero(t, s.rowed[0])
	// A QP left with no receive posts what it is owed at once, and a size
	// that has counted all its receives posts what is owed (postOwed).
	s.rowed[0] = 0
	s.qps[0] = recreateQP(t, s)
	s.rposted[0] = 0
	require.NoError(t, s.postRecvList(0, 2))
	s.rposted[0]-- // a completion: one still posted
	require.NoError(t, s.postRecv(0))
	require.Equal(t, []int{1, 1}, []int{s.rposted[0], s.rowed[0]}, "owed, not posted")
	s.rposted[0]-- // the last posted completes
	require.NoError(t, s.postRecv(0))
	require.Equal(t, []int{2, 0}, []int{s.rposted[0], s.rowed[0]}, "none left: the two owed go at once")
	s.rposted[0]--
	require.NoError(t, s.postRecv(0))
	require.NoError(t, s.postOwed(0))
	require.Equal(t, []int{2, 0}, []int{s.rposted[0], s.rowed[0]}, "postOwed posts the one owed")
	require.NoError(t, s.postOwed(0), "nothing owed: nothing posted")
	require.Equal(t, 2, s.rposted[0])
	// A new size's top-up stands for what was owed.
	s.rposted[0], s.rowed[0] = 0, 3
	s.qps[0] = recreateQP(t, s)
	require.NoError(t, s.postRecvs(16))
	require.Equal(t, 16, s.rposted[0])
	require.Zero(t, s.rowed[0])
}

// recreateQP replaces s's QP with a fresh one (an empty receive queue).
func recreateQP(t *testing.T, s *session) *rxe.QP {
	t.Helper()
	require.NoError(t, s.qps[0].Destroy())
	qp, err := s.pd.CreateQP(rxe.QPInitAttr{Type: rxe.QPTypeRC, SendCQ: s.scq, RecvCQ: s.rcq,
		Cap: rxe.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	require.NoError(t, err)
	toInit(t, qp)
	return qp
}

// toInit moves qp to INIT, where it takes receives.
func toInit(t *testing.T, qp *rxe.QP) {
	t.Helper()
	require.NoError(t, qp.Modify(&rxe.QPAttr{State: rxe.QPSInit, Port: 1, AccessFlags: rxe.AccessLocalWrite},
		rxe.QPAttrState|rxe.QPAttrPKeyIndex|rxe.QPAttrPort|rxe.QPAttrAccessFlags))
}

// TestRecvPostListRun: SEND bandwidth runs whose receiving end posts in
// lists carry every message, with -b, -q and an SRQ, UC and UD, -D and
// -a, and the header and JSON say so.
func TestRecvPostListRun(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"-n", "800", "--recv_post_list", "8", "-r", "16", "-s", "4096"},
		{"-n", "800", "--recv_post_list", "16", "-r", "16", "-b"},
		{"-n", "400", "--recv_post_list", "8", "-q", "2", "--use-srq", "-r", "32"},
		{"-n", "400", "--recv_post_list", "4", "-q", "3", "-r", "8"},
		{"-n", "400", "--recv_post_list", "10", "-c", "UC", "-s", "1024"},
		{"-n", "400", "--recv_post_list", "10", "-c", "UD", "-s", "1024"},
		{"-a", "-n", "5", "--recv_post_list", "5"}, // -n 5: the fewest, as -a's 8 MiB messages cost
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			out, errs, code := runCmd(t, append([]string{"send-bw", "--loopback", "--udp-port", "0", "--json"}, args...)...)
			require.Equal(t, cli.ExitOK, code, "%v: %s", args, errs)
			var doc struct {
				RecvPostList int         `json:"recv_post_list"`
				QPs          int         `json:"qps"`
				Results      []report.BW `json:"results"`
			}
			require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
			require.Equal(t, args[slices.Index(args, "--recv_post_list")+1], strconv.Itoa(doc.RecvPostList), "%v", args)
			require.NotEmpty(t, doc.Results)
			for _, r := range doc.Results {
				n, err := strconv.Atoi(args[slices.Index(args, "-n")+1])
				require.NoError(t, err)
				require.Equal(t, uint64(doc.QPs*n), r.Iters, "%v: every message of size %d", args, r.Size)
			}
		})
	}
	out, errs, code := runCmd(t, "send-bw", "--loopback", "--udp-port", "0", "-D", "1", "-f", "0", "--recv_post_list", "32")
	require.Equal(t, cli.ExitOK, code, errs)
	require.Contains(t, out, " Recv Post List  : 32\n")
}

// TestRecvPostListErrors: --recv_post_list's rules, perftest's and the
// depth's.
func TestRecvPostListErrors(t *testing.T) {
	requireUsageErrors(t, []usageCase{
		{[]string{"send-lat", "--recv_post_list", "4"}, "--recv_post_list is for the bandwidth tests"},
		{[]string{"write-bw", "--recv_post_list", "4"}, "--recv_post_list: write-bw posts no receives"},
		{[]string{"send-bw", "--recv_post_list", "3", "-n", "100"}, "-n 100 is not a multiple of the receive post list 3"},
		{[]string{"send-bw", "--recv_post_list", "64", "-r", "32", "-n", "640"}, "--recv_post_list 64 is more than the 32 receives posted for a QP"},
		{[]string{"send-bw", "--recv_post_list", "8", "-D", "2", "-n", "5"}, "--recv_post_list 8 is more than the 5 receives posted for a QP (-r, at most -n"},
		{[]string{"send-bw", "--recv_post_list", "16", "-r", "32", "-q", "4", "--use-srq", "-n", "640"}, "more than the 8 receives"},
		{[]string{"send-bw", "--recv_post_list", "0"}, "receive post list 0 not in [1, 16384]"},
	})
}
