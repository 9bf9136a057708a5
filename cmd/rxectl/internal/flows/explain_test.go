package flows

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/packet"
)

// TestNAKName: the fatal NAK codes (IBA 9.7.5.2.4) in words; others by
// their code's name.
func TestNAKName(t *testing.T) {
	require.Equal(t, "Invalid request", nakName(packet.NAKInvalidRequest))
	require.Equal(t, "Remote access error", nakName(packet.NAKRemoteAccess))
	require.Equal(t, "Remote operational error", nakName(packet.NAKRemoteOperation))
	require.Equal(t, "INVALID_RD_REQ", nakName(packet.NAKInvalidRDRequest))
}

// TestRecoverySentence: episodes grouped by cause, each group's duration
// its median (the middle of an odd count, the mean of the two middle ones
// of an even count) marked "(median)" when there are several; up to three
// ACK timeouts are listed one by one, more are summed up with their median
// silence; probes and unexplained resends name the rewind frames of their
// first three episodes and how many more.
func TestRecoverySentence(t *testing.T) {
	ms := func(n int) Duration { return Duration(time.Duration(n) * time.Millisecond) }
	nak := func(d int) Recovery { return Recovery{Cause: CauseSequenceNAK, Duration: ms(d)} }
	to := func(frame, silence int) Recovery {
		return Recovery{Cause: CauseTimeout, RewindFrame: frame, Silence: ms(silence)}
	}
	at := func(c Cause, frame int) Recovery { return Recovery{Cause: c, RewindFrame: frame} }
	tests := []struct {
		name string
		eps  []Recovery
		want string
	}{
		{"one", []Recovery{nak(3)}, "1 resend after PSN sequence error NAKs in 3.0 ms"},
		{"median of three", []Recovery{nak(1), nak(9), nak(5)}, "3 resends after PSN sequence error NAKs in 5.0 ms (median)"},
		{"two", []Recovery{nak(5), nak(5)}, "2 resends after PSN sequence error NAKs in 5.0 ms (median)"},
		{"three timeouts", []Recovery{to(7, 10), to(9, 20), to(11, 30)},
			"1 ACK timeout of 10 ms at frame 7, 1 ACK timeout of 20 ms at frame 9 and 1 ACK timeout of 30 ms at frame 11"},
		{"four timeouts", []Recovery{to(7, 10), to(9, 40), to(11, 30), to(13, 20)},
			"4 ACK timeouts (silences of 25 ms median, first at frame 7)"},
		{"probes", []Recovery{at(CauseProbe, 4), at(CauseProbe, 8), at(CauseProbe, 12), at(CauseProbe, 16)},
			"4 probes (one packet sent again, then on at the highest PSN; at frames 4, 8, 12 and 1 more)"},
		{"causes in order", []Recovery{at(CauseUnknown, 30), nak(2)},
			"1 resend after PSN sequence error NAKs in 2.0 ms and 1 resend with no cause in the capture (at frame 30)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, recoverySentence(tc.eps))
		})
	}
}

// TestLossSentenceCapturedFirstCopies: what the capture holds of a
// resent packet's first copy says where it was lost: a READ response
// read again (whatever started the re-read) was lost after the capture
// point; a request sent again on a timer (timeout, probe, or no cause
// seen) was lost after it or answered late; one sent again on a NAK, or
// after an ACK the capture holds, is said so.
func TestLossSentenceCapturedFirstCopies(t *testing.T) {
	h := &half{req: &Flow{}, resp: &Flow{}}
	ep := func(c Cause, read bool, psn uint32, first int) Recovery {
		return Recovery{Cause: c, Read: read, PSN: psn, FirstSentFrame: first}
	}
	tests := []struct {
		name string
		eps  []Recovery
		want string
	}{
		{"READ response re-read on a timeout", []Recovery{ep(CauseTimeout, true, 12, 4)},
			"READ response PSN 12 (frame 4) lost after the capture point: the capture holds it, yet it was read again"},
		{"READ responses re-read", []Recovery{ep(CauseImpliedNAK, true, 12, 4), ep(CauseImpliedNAK, true, 20, 9)},
			"At least 2 READ responses lost after the capture point (first PSN 12, frame 4): the capture holds them, yet they were read again"},
		{"requests resent on NAKs", []Recovery{ep(CauseSequenceNAK, false, 7, 3), ep(CauseSequenceNAK, false, 30, 11)},
			"At least 2 requests or their ACKs lost after the capture point (first PSN 7, frame 3): the capture holds them, yet they were sent again"},
		{"request resent on a NAK", []Recovery{ep(CauseSequenceNAK, false, 7, 3)},
			"Request PSN 7 (frame 3) or its ACK lost after the capture point: the capture holds it, yet it was sent again"},
		{"request resent with no cause seen", []Recovery{ep(CauseUnknown, false, 7, 3)},
			"Request PSN 7 (frame 3) sent again on a timer though the capture holds it: it or its ACK was lost after the capture point, or the ACK came after the requester's timer fired"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, lossSentence(h, tc.eps))
		})
	}
}

// TestExplainNamesRequesters: on a connection where both ends sent
// requests, each sentence names the requester's direction it is about.
func TestExplainNamesRequesters(t *testing.T) {
	a := &half{req: &Flow{Src: hostA, Dst: hostB}}
	b := &half{req: &Flow{Src: hostB, Dst: hostA}}
	c := &Connection{Recoveries: []Recovery{
		{Cause: CauseSequenceNAK, Requester: hostA, Duration: Duration(time.Millisecond)},
		{Cause: CauseSequenceNAK, Requester: hostB, Duration: Duration(2 * time.Millisecond)},
	}}
	require.Equal(t, []string{
		"10.0.0.1:49152 → 10.0.0.2:4791: Recovered by 1 resend after PSN sequence error NAKs in 1.0 ms.",
		"10.0.0.2:4791 → 10.0.0.1:49152: Recovered by 1 resend after PSN sequence error NAKs in 2.0 ms.",
	}, explain(c, map[int]*half{0: a, 1: b}, []int{0, 1}))
	require.Equal(t, []string{"Recovered by 1 resend after PSN sequence error NAKs in 1.0 ms."},
		explain(c, map[int]*half{0: a}, []int{0, 1}))
}
