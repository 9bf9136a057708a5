package faults_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/netdev/faults"
)

// TestValidateQueueLimits: a negative MaxQueue or MaxDatagram is refused
// by Validate, and so by Wrap.
func TestValidateQueueLimits(t *testing.T) {
	for _, cfg := range []faults.Config{{MaxQueue: -1}, {MaxDatagram: -1}} {
		require.ErrorIs(t, cfg.Validate(), faults.ErrRule, "%+v", cfg)
		require.Panics(t, func() { faults.Wrap(&recorder{}, cfg) }, "%+v", cfg)
	}
	require.NoError(t, (&faults.Config{}).Validate())
}

// ipReporter is a Conn that can report IP fields, with the given result.
type ipReporter struct {
	discard
	asked int
	err   error
}

func (r *ipReporter) ReportIPFields() error {
	r.asked++
	return r.err
}

// TestReportIPFieldsAsksInner: ReportIPFields passes the request to the
// wrapped Conn and returns its answer, or errors.ErrUnsupported if that
// Conn cannot report (netdev.IPFieldReporter).
func TestReportIPFieldsAsksInner(t *testing.T) {
	cfg := faults.Config{Rules: mustRules(t, "drop=0.5")}
	denied := errors.New("no IP_RECVTOS here")
	for _, want := range []error{nil, denied} {
		r := &ipReporter{err: want}
		require.Equal(t, want, faults.Wrap(r, cfg).ReportIPFields())
		require.Equal(t, 1, r.asked)
	}
	require.ErrorIs(t, faults.Wrap(&recorder{}, cfg).ReportIPFields(), errors.ErrUnsupported)
}
