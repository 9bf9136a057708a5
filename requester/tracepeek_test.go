package requester

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTimerAndResendNames(t *testing.T) {
	require.Equal(t, "", Timer(0).String())
	require.Equal(t, "retransmit", TimerRetransmit.String())
	require.Equal(t, "rnr_wait+recovery", (TimerRNR | TimerRecovery).String())
	require.Equal(t, "", ResendNone.String())
	require.Equal(t, "tail_probe", ResendProbe.String())
	require.Equal(t, "selective_repeat", ResendSelective.String())
}
