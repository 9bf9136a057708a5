package faults_test

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/netdev"
	"github.com/gorxe/gorxe/netdev/faults"
	"github.com/gorxe/gorxe/packet"
)

// step is one read a scriptedReader expects: by ReadBatchGated (gated) or
// TryReadBatch, returning pkts (PSNs of RC_SEND_ONLY datagrams) or err.
type step struct {
	gated bool
	psns  []int
	err   error
}

// scriptedReader is a netdev.SharedReader that answers reads from a
// script, and fails a read the script does not expect.
type scriptedReader struct {
	discard
	t     *testing.T
	steps []step
}

var errUnscripted = errors.New("read not in the script")

func (s *scriptedReader) read(gated bool, msgs []netdev.Message, gate *netdev.Gate) (int, error) {
	if len(s.steps) == 0 || s.steps[0].gated != gated {
		return 0, fmt.Errorf("%w (gated %v)", errUnscripted, gated)
	}
	st := s.steps[0]
	s.steps = s.steps[1:]
	if st.err != nil {
		return 0, st.err
	}
	require.LessOrEqual(s.t, len(st.psns), len(msgs), "script: a step longer than the batch")
	for i, psn := range st.psns {
		p := roce(s.t, packet.RCSendOnly, psn)
		msgs[i].N = copy(msgs[i].Buf, p)
	}
	if gated && len(st.psns) > 0 {
		require.True(s.t, gate.TryLock(), "ReadBatchGated was called holding the gate")
	}
	return len(st.psns), nil
}

func (s *scriptedReader) ReadBatchGated(msgs []netdev.Message, gate *netdev.Gate) (int, error) {
	return s.read(true, msgs, gate)
}

func (s *scriptedReader) TryReadBatch(msgs []netdev.Message) (int, error) {
	return s.read(false, msgs, nil)
}

// TestSharedReadsScripted drives the reading in turn (ReadBatchGated,
// TryReadBatch) over a scripted inner reader, with receive rules that drop
// by PSN order: a batch the rules drop entirely is followed by further
// reads, within the same call; a full batch with drops in it is filled
// again from the inner Conn (netdev.SharedReader: a reader that got a
// full batch reads again); an error after some datagrams were kept is
// left for the next read, and an error returned leaves the gate free;
// with no receive rule the datagrams pass through.
func TestSharedReadsScripted(t *testing.T) {
	refused := syscall.ECONNREFUSED
	tests := []struct {
		name  string
		rules []string
		gated bool // the call: ReadBatchGated, else TryReadBatch
		steps []step
		want  []int // PSNs returned
		err   error
	}{
		{"gated: no receive rule", nil, true,
			[]step{{gated: true, psns: []int{0, 1}}}, []int{0, 1}, nil},
		{"try: no receive rule", nil, false,
			[]step{{psns: []int{0, 1}}}, []int{0, 1}, nil},
		{"try: nothing there", []string{"drop=#1"}, false,
			[]step{{}}, nil, nil},
		{"gated: a batch all dropped, then more in the socket", []string{"drop=#1-2"}, true,
			[]step{{gated: true, psns: []int{0, 1}}, {psns: []int{2}}}, []int{2}, nil},
		{"gated: a batch all dropped, then the next arrival", []string{"drop=#1-2"}, true,
			[]step{{gated: true, psns: []int{0, 1}}, {}, {gated: true, psns: []int{2}}}, []int{2}, nil},
		{"gated: a batch all dropped, then an error", []string{"drop=#1-2"}, true,
			[]step{{gated: true, psns: []int{0, 1}}, {err: refused}}, nil, refused},
		{"gated: a full batch all dropped, then an error", []string{"drop=#1-4"}, true,
			[]step{{gated: true, psns: []int{0, 1, 2, 3}}, {err: refused}}, nil, refused},
		{"try: a batch all dropped, then more", []string{"drop=#1-2"}, false,
			[]step{{psns: []int{0, 1}}, {psns: []int{2}}}, []int{2}, nil},
		{"gated: a full batch with a drop is filled again", []string{"drop=#2"}, true,
			[]step{{gated: true, psns: []int{0, 1, 2, 3}}, {psns: []int{4}}}, []int{0, 2, 3, 4}, nil},
		{"try: a full batch with a drop is filled again", []string{"drop=#2"}, false,
			[]step{{psns: []int{0, 1, 2, 3}}, {psns: []int{4}}}, []int{0, 2, 3, 4}, nil},
		{"try: an error after datagrams kept waits", []string{"drop=#2"}, false,
			[]step{{psns: []int{0, 1, 2, 3}}, {err: refused}}, []int{0, 2, 3}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var rules []faults.Rule
			for _, r := range tc.rules {
				rules = append(rules, mustRules(t, r+",dir=recv")...)
			}
			s := &scriptedReader{t: t, steps: tc.steps}
			c := faults.Wrap(s, faults.Config{Rules: rules})
			require.True(t, c.SharesReads())
			msgs := buffers(4, 256)
			var gate netdev.Gate
			var n int
			var err error
			if tc.gated {
				n, err = c.ReadBatchGated(msgs, &gate)
			} else {
				require.True(t, gate.TryLock())
				n, err = c.TryReadBatch(msgs)
			}
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				require.Zero(t, n)
			} else {
				require.NoError(t, err)
			}
			var got []int
			for _, m := range msgs[:n] {
				got = append(got, psnOf(m.Buf[:m.N]))
			}
			require.Equal(t, tc.want, got)
			require.Empty(t, s.steps, "the script was read to its end")
			if tc.gated && n == 0 {
				require.True(t, gate.TryLock(), "an error leaves the gate free")
			}
			gate.Release()
		})
	}
}

// TestReadBatchGatedNotShared: a Conn that does not read in turn says so
// from ReadBatchGated too.
func TestReadBatchGatedNotShared(t *testing.T) {
	a, b := netdev.NewPipe()
	defer a.Close()
	c := faults.Wrap(b, faults.Config{})
	defer c.Close()
	var gate netdev.Gate
	_, err := c.ReadBatchGated(buffers(1, 256), &gate)
	require.ErrorIs(t, err, errors.ErrUnsupported)
}
