package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheckOutputFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	ro := filepath.Join(dir, "ro")
	require.NoError(t, os.Mkdir(ro, 0o555))
	for _, tc := range []struct {
		name, want string
	}{
		{filepath.Join(dir, "a.svg"), ""},
		{filepath.Join(dir, "A.PNG"), ""},
		{filepath.Join(dir, "a.txt"), "must end in .svg or .png"},
		{filepath.Join(dir, "nope", "a.svg"), "no such file or directory"},
		{filepath.Join(file, "a.svg"), "is not a directory"},
	} {
		err := CheckOutputFile("--ladder", tc.name, ".svg", ".png")
		if tc.want == "" {
			require.NoError(t, err, tc.name)
			continue
		}
		require.ErrorContains(t, err, tc.want, tc.name)
		require.ErrorContains(t, err, "--ladder")
	}
	_, statErr := os.Stat(filepath.Join(dir, "a.svg"))
	require.ErrorIs(t, statErr, os.ErrNotExist, "the check creates no file")
	left, err := filepath.Glob(filepath.Join(dir, ".rxectl-check-*"))
	require.NoError(t, err)
	require.Empty(t, left, "the check's temporary file is removed")
	if os.Geteuid() != 0 { // root writes anywhere
		require.ErrorContains(t, CheckOutputFile("--plot", filepath.Join(ro, "p.svg")), "cannot write in")
	}
}
