package flows

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/packet"
)

// TestCorruptedPSNThatCameLate: a gap PSN that a bad-ICRC packet carried
// but a good copy of which came late since is not missing: only the
// gap's PSNs still missing are split into corrupted and lost.
func TestCorruptedPSNThatCameLate(t *testing.T) {
	ps := []pk{send(0, 1), corrupt(send(1, 2)), corrupt(send(2, 3)), send(3, 5), send(4, 3)}
	rep := analyse(build(t, ps), Options{})
	f := rep.Connections[0].Flows[0]
	require.Equal(t, []int{1, 2, 1, 1}, []int{f.PSNGaps, f.PSNMissing, f.PSNCorrupt, f.PSNLate})
}

// TestFramesListedOnce: the packets of one datagram share its frame,
// which the lists of bad-ICRC frames name once.
func TestFramesListedOnce(t *testing.T) {
	require.Equal(t, []int{7}, appendFrame(appendFrame(nil, 7), 7))
	require.Equal(t, []int{7, 9, 7}, appendFrame(appendFrame(appendFrame(nil, 7), 9), 7))
}

// TestNAKCounts: RNR NAKs list each timer code once; a selective-repeat
// report whose PSN is its MSN says how far the responder has received (a
// progress report), any other asks for a hole.
func TestNAKCounts(t *testing.T) {
	sr := packet.NAKSyndrome(packet.NAKSelectiveRepeat)
	rnr := func(us int, psn uint32, code uint8) pk {
		return pk{us: us, fromB: true, op: packet.RCAcknowledge, psn: psn, syn: packet.RNRSyndrome(code)}
	}
	ps := []pk{
		send(0, 1), rnr(1, 1, 12), send(700, 1), rnr(701, 1, 12), send(1400, 1), rnr(1401, 1, 14),
		send(2000, 1), send(2001, 2), send(2002, 3), send(2003, 5),
		{us: 2010, fromB: true, op: packet.RCAcknowledge, psn: 4, syn: sr}, // MSN 1: a hole at 4
		{us: 2011, fromB: true, op: packet.RCAcknowledge, psn: 1, syn: sr}, // MSN 1: progress
	}
	rep := analyse(build(t, ps), Options{})
	n := rep.Connections[0].Flows[1].NAKs
	require.Equal(t, 3, n.RNR)
	require.Equal(t, []uint8{12, 14}, n.RNRTimers)
	require.Equal(t, 1, n.HoleReports)
	require.Equal(t, 1, n.ProgressReports)
}
