package faults_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/netdev/faults"
	"github.com/gorxe/gorxe/packet"
)

// recorder is a Conn that keeps copies of what it is given to send.
type recorder struct {
	discard
	got [][]byte
}

func (r *recorder) WriteBatch(m []netdev.Message) (int, error) {
	for i := range m {
		r.got = append(r.got, bytes.Clone(m[i].Buf[:m[i].N]))
	}
	return len(m), nil
}

// TestRuleDecisionsIndependentOfOtherRules: the package promises that a
// rule's decisions depend only on the seed and the datagrams of its
// direction, "not on time, batching or the other rules". So a corrupt
// rule (at the same index, so with the same generator) must corrupt the
// same RC_RDMA_READ_RESPONSE_MIDDLE datagrams, the same bits, whether the
// rule before it drops half the SEND_MIDDLEs or applies to no datagram at
// all.
func TestRuleDecisionsIndependentOfOtherRules(t *testing.T) {
	const n = 2000
	pkts := alternating(t, n) // even: RC_SEND_MIDDLE, odd: RC_RDMA_READ_RESPONSE_MIDDLE
	corrupted := func(first string) map[int][]byte {
		r := &recorder{}
		fc := faults.Wrap(r, faults.Config{Seed: 3, Rules: mustRules(t, first, "corrupt=0.5,dir=send")})
		for _, p := range pkts {
			m := []netdev.Message{message(p)}
			_, err := fc.WriteBatch(m)
			require.NoError(t, err)
		}
		out := map[int][]byte{}
		for _, b := range r.got {
			psn := int(packet.BTH(b).PSN())
			if psn%2 == 1 && !bytes.Equal(b, pkts[psn]) {
				out[psn] = b
			}
		}
		return out
	}
	some := corrupted("drop=0.5,op=RC_SEND_MIDDLE,dir=send")
	none := corrupted("drop=0.5,op=RC_ACKNOWLEDGE,dir=send")
	require.NotEmpty(t, none)
	require.Equal(t, none, some, "the corrupt rule's decisions on READ responses changed with the drop rule's opcodes")
}
