package rxe

import "github.com/gorxe/gorxe/requester"

// RecoveryConfig tunes loss recovery in round trips for every QP of a
// device (Options.Recovery): the RTT estimate, the recovery timer with its
// tail-loss probe, and the adaptive go-back-N window. The zero value turns
// it all on; it changes nothing on the wire. See docs/recovery.md.
type RecoveryConfig = requester.RecoveryConfig

// RecoveryCounters are a QP's loss recovery counters (QPCounters.Requester.Recovery).
type RecoveryCounters = requester.RecoveryCounters

// PeerAnswered reports, for a QP whose requester failed with
// RETRY_EXC_ERR, whether the peer sent any response between the last
// progress and the failure (responses is how many): false means it was
// silent during all the retries (a wrong address, a firewall, a peer that
// is gone), true that it answered but made no progress (heavy loss, or a
// peer busy resending older responses). failed is false if the QP has not
// failed with RETRY_EXC_ERR.
func (c QPCounters) PeerAnswered() (answered bool, responses uint64, failed bool) {
	r := c.Requester.Recovery
	return r.RetryResponses > 0, r.RetryResponses, r.RetryFailed
}
