package trace

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// resendLines are events of rxe's resend tests (rxe/trace_resend_test.go)
// with the optional fields timer, action, resend and psn, and two of a
// trace written before them.
const resendLines = `{"t":0.000640000,"dev":"a","qpn":17,"ev":"retry","engine":"requester","cause":"RNR NAK","deadline_ns":640000,"resend":"rnr","psn":100}
{"t":0.001280000,"dev":"a","qpn":17,"ev":"timer_fire","engine":"completer","timer":"rnr_wait","action":"rnr","psn":100}
{"t":0.001280000,"dev":"a","qpn":17,"ev":"send","engine":"requester","op":"RC_SEND_ONLY","resend":"rnr","psn":100}
{"t":0.003000000,"dev":"a","qpn":17,"ev":"timer_fire","engine":"completer","timer":"recovery","action":"tail_probe","psn":101}
{"t":0.003000000,"dev":"a","qpn":17,"ev":"send","engine":"requester","op":"RC_RDMA_WRITE_FIRST","resend":"tail_probe","psn":101}
{"t":0.003000000,"dev":"a","qpn":17,"ev":"retry","engine":"requester","cause":"probe answered","resend":"go_back_n","psn":102}
{"t":0.004000000,"dev":"a","qpn":17,"ev":"retry","engine":"requester","cause":"hole report","resend":"selective_repeat","psn":101}
{"t":0.004000000,"dev":"a","qpn":17,"ev":"retry","engine":"requester","cause":"gap in a later READ","resend":"reread"}
{"t":0.004500000,"dev":"a","qpn":17,"ev":"retry","engine":"requester","cause":"lost response","resend":"reread","psn":101}
{"t":0.005000000,"dev":"a","qpn":17,"ev":"timer_fire","engine":"completer","timer":"sr_recheck","action":"none"}
{"t":0.006000000,"dev":"a","qpn":17,"ev":"timer_fire","engine":"completer"}
{"t":0.006000000,"dev":"a","qpn":17,"ev":"retry","engine":"requester","cause":"timeout"}
`

func TestTimelineResends(t *testing.T) {
	evs, err := Read(strings.NewReader(resendLines))
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, WriteTimeline(&buf, evs, Filter{}))
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		got = append(got, strings.TrimSpace(l[strings.Index(l, "QP 17")+len("QP 17"):]))
	}
	require.Equal(t, []string{
		"requester  RETRY (RNR NAK): wait 640 µs, then resend from PSN 100",
		"completer  timer fired (rnr_wait): RNR wait over, resend from PSN 100",
		"requester  → RC_SEND_ONLY PSN 100  [resend: RNR retry]",
		"completer  timer fired (recovery): tail-loss probe of PSN 101",
		"requester  → RC_RDMA_WRITE_FIRST PSN 101  [resend: tail-loss probe]",
		"requester  RETRY (probe answered): go back N from PSN 102",
		"requester  RETRY (hole report): selective-repeat resend from PSN 101",
		"requester  RETRY (gap in a later READ): re-read the missing responses",
		"requester  RETRY (lost response): re-read from PSN 101",
		"completer  timer fired (sr_recheck): nothing to send",
		"completer  timer fired",
		"requester  RETRY (timeout): go back and resend",
	}, got)
}
