package syncbuf

import (
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestConcurrentWrites: writers and a reader at once (run with -race);
// every write lands whole.
func TestConcurrentWrites(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				n, err := b.Write([]byte("ab"))
				require.NoError(t, err)
				require.Equal(t, 2, n)
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	require.Equal(t, strings.Repeat("ab", 400), b.String())
}
