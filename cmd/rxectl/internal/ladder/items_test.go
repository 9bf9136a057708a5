package ladder

import (
	"bytes"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/cmd/rxectl/internal/flows"
	"github.com/gorxe/gorxe/cmd/rxectl/internal/flows/flowstest"
	"github.com/gorxe/gorxe/packet"
)

// TestItemLabels checks the items one packet and its note make: a NAK
// or RNR NAK sent again keeps its colour, a resend names its cause unless
// a timeout row already says it, and only a READ request shows its
// length, in KiB or MiB when whole.
func TestItemLabels(t *testing.T) {
	t0 := time.Unix(1000, 0)
	a := netip.MustParseAddrPort("10.0.0.1:4791")
	b := netip.MustParseAddrPort("10.0.0.2:4791")
	nakSyn := packet.NAKSyndrome(packet.NAKPSNSeqError)
	tests := []struct {
		name  string
		p     flows.Packet
		note  *flows.Note
		kinds []Kind
		label string
	}{
		{"NAK sent again", rcPacket(t, t0, a, b, 1, 0, 0, true, packet.RCAcknowledge, 5, 0, nakSyn),
			&flows.Note{Resent: true}, []Kind{NAK}, "NAK PSN_SEQ_ERR 5 MSN 1"},
		{"sequence NAK resend", rcPacket(t, t0, a, b, 1, 0, 0, false, packet.RCSendOnly, 5, 8, 0),
			&flows.Note{Resent: true, Cause: flows.CauseSequenceNAK}, []Kind{Resent}, "SEND_ONLY 5 (sequence NAK)"},
		{"timeout resend", rcPacket(t, t0, a, b, 1, 0, 0, false, packet.RCSendOnly, 5, 8, 0),
			&flows.Note{Resent: true, Cause: flows.CauseTimeout, Silence: 3 * time.Millisecond}, []Kind{Timeout, Resent}, "SEND_ONLY 5"},
		{"WRITE shows no length", rcPacket(t, t0, a, b, 1, 0, 0, false, packet.RCRDMAWriteOnly, 5, 8, 0),
			nil, []Kind{Request}, "WRITE_ONLY 5"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := &Diagram{}
			d.add(tc.p, tc.note, tc.p.Src == a)
			var kinds []Kind
			for _, it := range d.Items {
				kinds = append(kinds, it.Kind)
			}
			require.Equal(t, tc.kinds, kinds)
			require.Equal(t, tc.label, d.Items[len(d.Items)-1].Label)
		})
	}
	for _, tc := range []struct {
		n    uint32
		want string
	}{
		{1 << 20, "1 MiB"}, {3 << 20, "3 MiB"}, {1<<20 + 1<<10, "1025 KiB"}, {1 << 10, "1 KiB"}, {1<<10 + 1, "1025"}, {1000, "1000"},
	} {
		require.Equal(t, tc.want, sizeText(tc.n), "%d", tc.n)
	}
}

// TestRowsGapsAndFolds: a silence is measured from the end of the row
// before (a band's last item), is not shown before a timeout row (which
// says how long the silence was), and a band holds items of one kind.
func TestRowsGapsAndFolds(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms float64) time.Time { return t0.Add(time.Duration(ms * float64(time.Millisecond))) }
	mid := func(ms float64, psn uint32, k Kind) Item {
		return Item{Kind: k, Dir: ToLeft, Time: at(ms), Label: "x", Fold: "READ_RESPONSE_MIDDLE", PSN: psn}
	}
	d := &Diagram{Items: []Item{
		mid(0, 1, Response), mid(1, 2, Response), mid(2, 3, Response), mid(3, 4, Response),
		{Kind: Request, Dir: ToRight, Time: at(3.5), Label: "SEND_ONLY 9"},
		{Kind: Timeout, Dir: Across, Time: at(20), Label: "retransmission timeout"},
		mid(21, 5, Response), mid(21, 6, Resent), mid(21, 7, Response), mid(21, 8, Response),
	}}
	rows := d.rows()
	require.Len(t, rows, 7)
	require.Equal(t, 4, rows[0].n)
	require.Zero(t, rows[1].gap, "0.5 ms after the band's last item, not 3.5 ms after its first")
	require.Zero(t, rows[2].gap, "the timeout row says the silence itself")
	require.Equal(t, time.Millisecond, rows[3].gap)
	for _, r := range rows[3:] {
		require.Equal(t, 1, r.n, "a resend in the run breaks the band")
	}
}

// TestDrawBandsAndFrameNote: a band, of arrows or of notes, is drawn
// taller than a row, on its fill (and the legend shows the fill once);
// the legend mentions frame numbers only when items carry them. Write
// picks PNG by the name's extension in any case.
func TestDrawBandsAndFrameNote(t *testing.T) {
	t0 := time.Unix(1000, 0)
	d := &Diagram{Title: "t", Left: "l", Right: "r", MinFold: 2, Items: []Item{
		{Kind: Response, Dir: ToLeft, Time: t0, Label: "x", Fold: "READ_RESPONSE_MIDDLE", PSN: 1},
		{Kind: Response, Dir: ToLeft, Time: t0, Label: "x", Fold: "READ_RESPONSE_MIDDLE", PSN: 2},
		{Kind: Note, Dir: OnLeft, Time: t0, Label: "n", Fold: "n"},
		{Kind: Note, Dir: OnLeft, Time: t0, Label: "n", Fold: "n"},
	}}
	_, h := d.Size()
	require.Equal(t, headerH+footerH+2*bandH, h)
	var buf bytes.Buffer
	require.NoError(t, d.WriteSVG(&buf))
	require.Equal(t, 3, strings.Count(buf.String(), `fill="#e8f0fa"`))
	require.Contains(t, buf.String(), "time since the first row<")
	require.NotContains(t, buf.String(), "frame number")
	d.Items[0].Frame = 7
	buf.Reset()
	require.NoError(t, d.WriteSVG(&buf))
	require.Contains(t, buf.String(), "time since the first row and frame number<")

	name := t.TempDir() + "/L.PNG"
	require.NoError(t, Write(name, d))
	b, err := os.ReadFile(name)
	require.NoError(t, err)
	require.Equal(t, "\x89PNG", string(b[:4]))
}

// TestSelectionBounds: --frames A-B and --time T1-T2 keep their ends,
// and times count from Start, the capture's first frame, when given.
func TestSelectionBounds(t *testing.T) {
	t0 := time.Unix(1000, 0)
	a := netip.MustParseAddrPort("10.0.0.1:4791")
	b := netip.MustParseAddrPort("10.0.0.2:4791")
	var pkts []flows.Packet
	for i := range 5 {
		pkts = append(pkts, rcPacket(t, t0, a, b, i+1, 0, 100*i, false, packet.RCSendOnly, uint32(i), 8, 0))
	}
	frames := func(sel Selection) []int {
		d, err := FromCapture(pkts, flowstest.Analyse(pkts, flows.Options{}), sel)
		require.NoError(t, err)
		var f []int
		for _, it := range d.Items {
			f = append(f, it.Frame)
		}
		return f
	}
	require.Equal(t, []int{2, 3, 4}, frames(Selection{FromFrame: 2, ToFrame: 4}))
	require.Equal(t, []int{2, 3}, frames(Selection{FromTime: 100 * time.Microsecond, ToTime: 200 * time.Microsecond}))
	require.Equal(t, []int{1, 2}, frames(Selection{FromTime: 100 * time.Microsecond, ToTime: 200 * time.Microsecond,
		Start: t0.Add(-100 * time.Microsecond)}))
}
