// Package cli holds what every rxectl command shares: the exit statuses
// and the parsing of flags that may come before or after the arguments.
package cli

import "flag"

// Exit statuses shared by every command.
const (
	ExitOK    = 0 // success
	ExitFail  = 1 // the command ran and failed (unreadable input, findings with --strict)
	ExitUsage = 2 // bad command line
)

// ParseIntermixed parses fs's flags wherever they appear in args and
// returns the other arguments in order; everything after "--" is an
// argument.
func ParseIntermixed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// CutRange splits a range flag's value "A-B" at its first '-' that is
// neither A's leading sign nor the sign of an exponent ("1e-05-2e-05" is
// 1e-05 to 2e-05), and reports whether there was one.
func CutRange(s string) (lo, hi string, ok bool) {
	for i := 1; i < len(s); i++ {
		if s[i] == '-' && s[i-1] != 'e' && s[i-1] != 'E' {
			return s[:i], s[i+1:], true
		}
	}
	return "", "", false
}
