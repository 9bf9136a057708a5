package rxe

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestConnectOptionsExplicit: ConnectOptions.Explicit makes a zero
// Timeout, RetryCnt, RNRRetry and MinRNRTimer the values 0 at the QP,
// where without it each zero is the default (14, 7, 7, 12); a bit for any
// other field is refused before the QP leaves RESET.
func TestConnectOptionsExplicit(t *testing.T) {
	all := QPAttrTimeout | QPAttrRetryCnt | QPAttrRNRRetry | QPAttrMinRNRTimer
	for _, tc := range []struct {
		name     string
		explicit QPAttrMask
		want     QPAttr
	}{
		{"defaults", 0, QPAttr{Timeout: 14, RetryCnt: 7, RNRRetry: 7, MinRNRTimer: 12}},
		{"all zero", all, QPAttr{}},
		{"retry only", QPAttrRetryCnt, QPAttr{Timeout: 14, RetryCnt: 0, RNRRetry: 7, MinRNRTimer: 12}},
		{"rnr only", QPAttrRNRRetry, QPAttr{Timeout: 14, RetryCnt: 7, RNRRetry: 0, MinRNRTimer: 12}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			da, db, _, _ := pipeDevices(t)
			a, b := newEnd(t, da, 4096), newEnd(t, db, 4096)
			ia, ib := a.qp.Info(100), b.qp.Info(200)
			require.NoError(t, a.qp.Connect(ia, ib, ConnectOptions{Explicit: tc.explicit}))
			require.NoError(t, b.qp.Connect(ib, ia, ConnectOptions{Explicit: tc.explicit}))
			got := a.qp.Query()
			require.Equal(t, [4]uint8{tc.want.Timeout, tc.want.RetryCnt, tc.want.RNRRetry, tc.want.MinRNRTimer},
				[4]uint8{got.Timeout, got.RetryCnt, got.RNRRetry, got.MinRNRTimer}, "timeout, retry_cnt, rnr_retry, min_rnr_timer")
		})
	}

	da, db, _, _ := pipeDevices(t)
	a, b := newEnd(t, da, 4096), newEnd(t, db, 4096)
	err := a.qp.Connect(a.qp.Info(1), b.qp.Info(2), ConnectOptions{Explicit: QPAttrRetryCnt | QPAttrPathMTU})
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.ErrorContains(t, err, "PATH_MTU")
	require.Equal(t, QPSReset, a.qp.State())
}
