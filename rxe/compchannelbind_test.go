package rxe

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gorxe/gorxe/internal/testutil"
)

// TestCompChannelGetBeforeFirstCQ: a Get that began before the channel's
// first CQ was created follows that CQ's device, and ends with ErrClosed
// when the device closes (CompChannel.Get).
func TestCompChannelGetBeforeFirstCQ(t *testing.T) {
	d, _ := newDevices(t, "pipe")
	ch := NewCompChannel(1)
	done := make(chan error, 1)
	go func() {
		_, err := ch.Get(context.Background())
		done <- err
	}()
	time.Sleep(2 * time.Millisecond) // let Get wait for the first CQ
	_, err := d.CreateCQWith(CQAttr{CQE: 4, Vector: -1, Channel: ch})
	require.NoError(t, err)
	require.NoError(t, d.Close())
	select {
	case err := <-done:
		require.ErrorIs(t, err, ErrClosed)
	case <-time.After(testutil.Bound()):
		t.Fatal("Get did not end when the device of the channel's first CQ closed")
	}
}
