package retry

// RNRRetryInfinite is the rnr_retry value that never runs out (IBTA
// 9.7.5.2.8): an RNRBudget made from it allows any number of RNR retries.
const RNRRetryInfinite = 7

// maxBudget is the largest value a 3-bit retry counter attribute can hold.
const maxBudget = 7

// RetryBudget counts the retries a requester may still make after a local
// ACK timeout or a PSN sequence error NAK: the 3-bit QP attribute retry_cnt
// (IBTA 9.7.6.1.3; rxe_comp.c, COMPST_ERROR_RETRY). A budget made from n
// allows exactly n retries; 7 is just 7, as IBTA says.
//
// Kernel rxe differs: it never decrements a retry_cnt of 7, so for rxe both
// counters treat 7 as infinite. We follow IBTA here; perftest's default of 7
// then gives 7 retries before RETRY_EXC_ERR.
//
// When Consume reports false the budget is spent: the caller completes the
// oldest outstanding WQE with status RETRY_EXC_ERR (IB_WC_RETRY_EXC_ERR),
// moves the QP to the error state and flushes the rest. Every response that
// makes progress calls Reset (rxe resets both counters on each useful
// response).
//
// The zero value is a budget of 0 retries. RetryBudget is a small value
// meant to live inside QP state; it is not safe for concurrent use.
type RetryBudget struct {
	limit, left uint8
}

// NewRetryBudget returns a full budget for the QP attribute retry_cnt.
// Values above 7 do not fit the 3-bit attribute and are treated as 7; the
// verbs layer should reject them before they get here.
func NewRetryBudget(retryCnt uint8) RetryBudget {
	retryCnt = min(retryCnt, maxBudget)
	return RetryBudget{limit: retryCnt, left: retryCnt}
}

// Consume spends one retry. It reports true if the retry may go ahead and
// false if the budget was already exhausted, in which case the caller
// produces RETRY_EXC_ERR (see RetryBudget).
func (b *RetryBudget) Consume() bool {
	if b.left == 0 {
		return false
	}
	b.left--
	return true
}

// Reset refills the budget to its configured value, as on every response that
// acknowledges new PSNs.
func (b *RetryBudget) Reset() { b.left = b.limit }

// Exhausted reports whether no retry is left, that is whether the next
// Consume would return false.
func (b RetryBudget) Exhausted() bool { return b.left == 0 }

// Remaining returns the number of retries still allowed.
func (b RetryBudget) Remaining() uint8 { return b.left }

// Limit returns the configured retry_cnt.
func (b RetryBudget) Limit() uint8 { return b.limit }

// RNRBudget counts the retries a requester may still make after RNR NAKs:
// the 3-bit QP attribute rnr_retry (IBTA 9.7.5.2.8; rxe_comp.c,
// COMPST_RNR_RETRY). A budget made from n < 7 allows exactly n retries; a
// budget made from RNRRetryInfinite (7) never runs out.
//
// When Consume reports false the budget is spent: the caller completes the
// oldest outstanding WQE with status RNR_RETRY_EXC_ERR
// (IB_WC_RNR_RETRY_EXC_ERR), moves the QP to the error state and flushes the
// rest. Every response that makes progress calls Reset.
//
// The zero value is a budget of 0 retries. RNRBudget is a small value meant
// to live inside QP state; it is not safe for concurrent use.
type RNRBudget struct {
	limit, left uint8
}

// NewRNRBudget returns a full budget for the QP attribute rnr_retry. Values
// above 7 do not fit the 3-bit attribute and are treated as 7 (infinite); the
// verbs layer should reject them before they get here.
func NewRNRBudget(rnrRetry uint8) RNRBudget {
	rnrRetry = min(rnrRetry, maxBudget)
	return RNRBudget{limit: rnrRetry, left: rnrRetry}
}

// Consume spends one RNR retry. It reports true if the retry may go ahead
// (always, for an infinite budget) and false if the budget was already
// exhausted, in which case the caller produces RNR_RETRY_EXC_ERR (see
// RNRBudget).
func (b *RNRBudget) Consume() bool {
	if b.limit == RNRRetryInfinite {
		return true
	}
	if b.left == 0 {
		return false
	}
	b.left--
	return true
}

// Reset refills the budget to its configured value, as on every response that
// acknowledges new PSNs.
func (b *RNRBudget) Reset() { b.left = b.limit }

// Exhausted reports whether no RNR retry is left, that is whether the next
// Consume would return false. An infinite budget is never exhausted.
func (b RNRBudget) Exhausted() bool { return b.limit != RNRRetryInfinite && b.left == 0 }

// Infinite reports whether the budget was made from RNRRetryInfinite.
func (b RNRBudget) Infinite() bool { return b.limit == RNRRetryInfinite }

// Remaining returns the number of RNR retries still allowed; for an infinite
// budget it stays at 7.
func (b RNRBudget) Remaining() uint8 { return b.left }

// Limit returns the configured rnr_retry.
func (b RNRBudget) Limit() uint8 { return b.limit }
