package perftest

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/cli"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/report"
	"github.com/gorxe/gorxe/rxe"
	"github.com/stretchr/testify/require"
)

// TestPostList: -l N posts N work requests per call in the bandwidth
// tests, with perftest's header (the title, "Post List", the note when
// -Q follows -l) and rules (-n a multiple of N, -Q dividing N); every
// iteration completes, in iteration and duration runs.
func TestPostList(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args  []string
		title string
		note  bool
		cqMod string
		iters uint64 // 0: a duration run
		list  int
	}{
		{[]string{"write-bw", "-n", "40", "-l", "4"}, "RDMA_Write Post List BW Test", true, "4", 40, 4},
		{[]string{"send-bw", "-n", "96", "-l", "8", "-s", "4096"}, "Send Post List BW Test", true, "8", 96, 8},
		{[]string{"read-bw", "-n", "30", "-l", "3", "-Q", "1"}, "RDMA_Read Post List BW Test", false, "1", 30, 3},
		{[]string{"write-bw", "-n", "64", "-l", "4", "-q", "2"}, "RDMA_Write Post List BW Test", true, "4", 128, 4},
		{[]string{"write-bw", "-D", "1", "-f", "0", "-l", "16", "-s", "4096"}, "RDMA_Write Post List BW Test", true, "16", 0, 16},
		{[]string{"write-bw", "-n", "40", "-l", "1"}, "RDMA_Write BW Test", false, "1", 40, 1},
	}
	for _, tc := range tests {
		args := append([]string{tc.args[0], "--loopback", "--udp-port", "0"}, tc.args[1:]...)
		out, errs, code := runCmd(t, args...)
		require.Equal(t, cli.ExitOK, code, "%v: %s", tc.args, errs)
		require.Contains(t, out, "                    "+tc.title+"\n", "%v", tc.args)
		note := report.ResultLine + "\nPost List requested - CQ moderation will be the size of the post list\n"
		require.Equal(t, tc.note, strings.HasPrefix(out, note), "%v: %q", tc.args, out)
		require.Contains(t, out, " CQ Moderation   : "+tc.cqMod+"\n", "%v", tc.args)
		out, errs, code = runCmd(t, append(args, "--json")...)
		require.Equal(t, cli.ExitOK, code, "%v: %s", tc.args, errs)
		var doc struct {
			PostList int         `json:"post_list"`
			Results  []report.BW `json:"results"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
		require.Equal(t, tc.list, doc.PostList)
		require.Len(t, doc.Results, 1)
		if tc.iters > 0 {
			require.Equal(t, tc.iters, doc.Results[0].Iters, "%v", tc.args)
			require.Positive(t, doc.Results[0].Peak, "%v: the peak is measured from the lists' posts", tc.args)
		} else {
			require.Positive(t, doc.Results[0].Iters, "%v", tc.args)
		}
		require.Positive(t, doc.Results[0].Avg, "%v", tc.args)
	}
}

// TestPostListErrors: the settings a post list cannot run with.
func TestPostListErrors(t *testing.T) {
	requireUsageErrors(t, []usageCase{
		{[]string{"write-bw", "-n", "10", "-l", "4"}, "-n 10 is not a multiple of the post list -l 4"},
		{[]string{"write-bw", "-n", "12", "-l", "4", "-Q", "3"}, "the post list -l 4 is not a multiple of the CQ moderation -Q 3"},
		{[]string{"write-bw", "-n", "16", "-l", "8", "-t", "4", "-Q", "4"}, "the post list -l 8 is longer than the tx depth -t 4"},
		{[]string{"write-lat", "-l", "2"}, "-l: post lists are for the bandwidth tests"},
		{[]string{"read-bw", "-l", "0"}, "post list 0 not in [1, 8192]"},
	})
}

// TestSendListsNext: each list's requests carry the QP and their index
// in their IDs, and every cq-mod'th and an iteration run's last are
// signaled.
func TestSendListsNext(t *testing.T) {
	l := &sendLists{wrs: []rxe.SendWR{{Opcode: rxe.WRRDMAWrite}, {Opcode: rxe.WRRDMAWrite}},
		lists: [][]rxe.SendWR{make([]rxe.SendWR, 4), make([]rxe.SendWR, 4)}, cqMod: 2}
	got := l.next(1, 8, 12)
	require.Len(t, got, 4)
	for k, wr := range got {
		require.Equal(t, uint64(1)<<32|uint64(8+k), wr.ID)
		require.Equal(t, k%2 == 1, wr.Flags&rxe.SendSignaled != 0, "request %d", 8+k)
		require.Equal(t, rxe.WRRDMAWrite, wr.Opcode)
	}
	l.cqMod = 4
	got = l.next(0, 0, 3) // an iteration run of 3: the third is its last
	require.Equal(t, []bool{false, false, true, true}, []bool{
		got[0].Flags&rxe.SendSignaled != 0, got[1].Flags&rxe.SendSignaled != 0,
		got[2].Flags&rxe.SendSignaled != 0, got[3].Flags&rxe.SendSignaled != 0})
	require.Zero(t, l.wrs[0].Flags&rxe.SendSignaled, "the template is not changed")
}
