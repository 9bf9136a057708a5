package cli

import (
	"flag"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestParseIntermixed: flags are taken before, between and after the
// arguments, which keep their order; after "--" everything is an
// argument; a bad flag anywhere is the flag package's error.
func TestParseIntermixed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args    []string
		pos     []string
		n       int
		v       bool
		wantErr string
	}{
		{nil, nil, 0, false, ""},
		{[]string{"a"}, []string{"a"}, 0, false, ""},
		{[]string{"-n", "3", "a", "-v", "b"}, []string{"a", "b"}, 3, true, ""},
		{[]string{"a", "b", "-n", "4"}, []string{"a", "b"}, 4, false, ""},
		{[]string{"a", "--", "-n", "5", "b"}, []string{"a", "-n", "5", "b"}, 0, false, ""},
		{[]string{"--", "-v"}, []string{"-v"}, 0, false, ""},
		{[]string{"a", "--", "b", "-v"}, []string{"a", "b", "-v"}, 0, false, ""},
		{[]string{"a", "--"}, []string{"a"}, 0, false, ""},
		{[]string{"-", "-v"}, []string{"-"}, 0, true, ""},
		{[]string{"a", "-x"}, nil, 0, false, "flag provided but not defined: -x"},
		{[]string{"a", "-n"}, nil, 0, false, "flag needs an argument: -n"},
	}
	for _, tc := range tests {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		n := fs.Int("n", 0, "")
		v := fs.Bool("v", false, "")
		pos, err := ParseIntermixed(fs, tc.args)
		if tc.wantErr != "" {
			require.ErrorContains(t, err, tc.wantErr, "%q", tc.args)
			require.Nil(t, pos)
			continue
		}
		require.NoError(t, err, "%q", tc.args)
		require.Equal(t, tc.pos, pos, "%q", tc.args)
		require.Equal(t, tc.n, *n, "%q", tc.args)
		require.Equal(t, tc.v, *v, "%q", tc.args)
	}
}

// TestCutRange: a range flag's value A-B splits at the first '-' that is
// neither A's leading sign nor an exponent's sign, so that the times
// rxectl prints in exponent form ("1e-05") are taken back.
func TestCutRange(t *testing.T) {
	for _, tc := range []struct {
		in     string
		lo, hi string
		ok     bool
	}{
		{"0.05-0.1", "0.05", "0.1", true},
		{"50ms-100ms", "50ms", "100ms", true},
		{"1e-05-2e-05", "1e-05", "2e-05", true},
		{"1E-5-2E-5", "1E-5", "2E-5", true},
		{"0-1e10", "0", "1e10", true},
		{"-1-2", "-1", "2", true},
		{"3-", "3", "", true},
		{"12", "", "", false},
		{"1e-05", "", "", false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			lo, hi, ok := CutRange(tc.in)
			require.Equal(t, tc.ok, ok)
			if ok {
				require.Equal(t, tc.lo, lo)
				require.Equal(t, tc.hi, hi)
			}
		})
	}
}
