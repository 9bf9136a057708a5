package rxe

import (
	"fmt"

	"github.com/gorxe/gorxe/responder"
)

// QPAttrSelectiveRepeat selects QPAttr.SelectiveRepeat, QPAttr.OOOLimit and
// QPAttr.PeerOOOLimit.
// It is a gorxe extension: bit 30 is not used by ibv_qp_attr_mask. An RC
// QP takes it from RESET to INIT, INIT to INIT and INIT to RTR, so that
// the responder (started at RTR) and the requester (started at RTS) see
// the same setting.
const QPAttrSelectiveRepeat QPAttrMask = 1 << 30

// MaxOOOLimit is the largest QPAttr.OOOLimit: the bytes of out-of-order
// requests one QP's responder may hold.
const MaxOOOLimit = 64 << 20

// srConfig is what the engines are given for selective repeat.
type srConfig struct {
	on        bool
	oooLimit  int // bytes; 0: responder.DefaultOOOLimit
	peerLimit int // the peer's out-of-order buffer in bytes; 0: its default
}

// checkSelectiveRepeat validates QPAttr.OOOLimit.
func checkSelectiveRepeat(attr *QPAttr, mask QPAttrMask) error {
	if mask&QPAttrSelectiveRepeat == 0 {
		return nil
	}
	if err := checkOOOLimit("out-of-order buffer", attr.OOOLimit); err != nil {
		return err
	}
	return checkOOOLimit("peer's out-of-order buffer", attr.PeerOOOLimit)
}

// checkOOOLimit refuses an out-of-order buffer bound (what names it) below
// 0 or above MaxOOOLimit.
func checkOOOLimit(what string, n int) error {
	if n < 0 || n > MaxOOOLimit {
		return fmt.Errorf("%w: %s of %d bytes (0 for the default, at most %d)", ErrInvalidArgument, what, n, MaxOOOLimit)
	}
	return nil
}

// selectiveRepeat returns the QP's selective-repeat setting (caller holds
// mu).
func (qp *QP) selectiveRepeat() srConfig {
	if !qp.attr.SelectiveRepeat {
		return srConfig{}
	}
	return srConfig{on: true, oooLimit: qp.attr.OOOLimit, peerLimit: qp.attr.PeerOOOLimit}
}

// oooBound is the out-of-order buffer an offer announces: limit, or the
// responder's default for 0.
func oooBound(limit int) int {
	if limit <= 0 {
		return responder.DefaultOOOLimit
	}
	return limit
}

// negotiateSR decides selective repeat for a connection between local and
// remote (the ConnInfos the two sides exchanged): on only when both offer
// it, so that each side's requester and the other side's responder agree
// (the peer decides the same from the same two offers). refuse is
// ConnectOptions.NoSelectiveRepeat: the local offer must then be absent,
// or the peer, which saw it, would turn selective repeat on alone.
func negotiateSR(local, remote ConnInfo, refuse bool) (QPAttr, error) {
	if refuse && local.SelectiveRepeat {
		return QPAttr{}, fmt.Errorf("%w: ConnectOptions.NoSelectiveRepeat, but the local ConnInfo offers selective repeat to the peer: clear its SelectiveRepeat before sending it", ErrInvalidArgument)
	}
	if !local.SelectiveRepeat || !remote.SelectiveRepeat {
		return QPAttr{}, nil
	}
	return QPAttr{SelectiveRepeat: true, OOOLimit: local.OOOLimit, PeerOOOLimit: min(max(remote.OOOLimit, 0), MaxOOOLimit)}, nil
}
