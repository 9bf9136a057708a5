package gorxe

import (
	"bytes"
	"go/format"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGofmt fails for any Go file that gofmt would change.
func TestGofmt(t *testing.T) {
	var bad []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		out, err := format.Source(src)
		if err != nil {
			bad = append(bad, path+": "+err.Error())
		} else if !bytes.Equal(src, out) {
			bad = append(bad, path)
		}
		return nil
	})
	require.NoError(t, err)
	require.Empty(t, bad, "run gofmt -w on these files")
}
