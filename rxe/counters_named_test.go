package rxe

import (
	"testing"
	"time"

	"github.com/gorxe/gorxe/requester"
	"github.com/gorxe/gorxe/responder"
	"github.com/stretchr/testify/require"
)

func TestNamedCounters(t *testing.T) {
	c := QPCounters{SentPkts: 1, RcvdPkts: 2, LocalDrops: 3, BackoffDelay: 5 * time.Microsecond,
		Requester: requester.Counters{RcvdSeqErr: 4, RetryExceededErr: 6, Retransmits: 7, CreditStalls: 13, CreditProbes: 14, CreditUpdates: 15},
		Responder: responder.Counters{DuplicateRequest: 8, SendRNRErr: 9, CreditUpdates: 16}}
	got := map[string]uint64{}
	for _, n := range c.Named() {
		_, dup := got[n.Name]
		require.False(t, dup, n.Name)
		got[n.Name] = n.Value
	}
	want := map[string]uint64{"sent_pkts": 1, "rcvd_pkts": 2, "local_drops": 3, "backoff_delay_ns": 5000,
		"rcvd_seq_err": 4, "retry_exceeded_err": 6, "retransmitted_pkts": 7, "duplicate_request": 8, "send_rnr_err": 9,
		"credit_stalls": 13, "credit_probes": 14, "credit_updates_rcvd": 15, "credit_updates_sent": 16}
	for k, v := range want {
		require.Equal(t, v, got[k], k)
	}
	d := Counters{SentPkts: 10, SendErr: 11, BadICRC: 12}.Named()
	require.Equal(t, NamedCounter{"sent_pkts", 10}, d[0])
	require.Equal(t, NamedCounter{"send_err", 11}, d[2])
	require.Equal(t, NamedCounter{"bad_icrc", 12}, d[3])
}
