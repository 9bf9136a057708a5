package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// CheckOutputFile checks, before a run, that the file a flag names can be
// written afterwards: its name ends in one of exts (case-insensitive; any
// name if exts is empty) and its directory exists and is writable. A run
// that measures for minutes and then cannot write its picture has wasted
// them. The file itself is not created (a temporary one in its directory
// is, and removed).
func CheckOutputFile(flag, name string, exts ...string) error {
	if len(exts) > 0 {
		ok := false
		for _, e := range exts {
			ok = ok || strings.HasSuffix(strings.ToLower(name), e)
		}
		if !ok {
			return fmt.Errorf("%s %q: the file name must end in %s", flag, name, strings.Join(exts, " or "))
		}
	}
	dir := filepath.Dir(name)
	fi, err := os.Stat(dir)
	switch {
	case err != nil:
		return fmt.Errorf("%s %q: %w", flag, name, err)
	case !fi.IsDir():
		return fmt.Errorf("%s %q: %s is not a directory", flag, name, dir)
	}
	// A file created and removed tells what the permission bits alone do
	// not (root, ACLs, a read-only mount).
	f, err := os.CreateTemp(dir, ".rxectl-check-*")
	if err != nil {
		return fmt.Errorf("%s %q: cannot write in %s: %w", flag, name, dir, err)
	}
	f.Close()
	return os.Remove(f.Name())
}
