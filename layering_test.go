package gorxe

import (
	"go/build"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/gorxe/gorxe"

// rule says which imports a package of this module may have in its
// non-test files. Standard library imports are always allowed.
type rule struct {
	// allow lists allowed import paths; an entry ending in "/..." allows a
	// whole tree.
	allow []string
}

var (
	gopacket = []string{"github.com/google/gopacket", "github.com/google/gopacket/layers", "github.com/google/gopacket/pcapgo"}
	sockets  = []string{"golang.org/x/net/ipv4", "golang.org/x/net/ipv6", "golang.org/x/sys/unix"}
	vocab    = []string{module + "/packet", module + "/retry", module + "/rxe/verbs", module + "/internal/ring", module + "/internal/sge"}
)

// rules is the dependency direction of DEVELOPERS.md: packet, retry and
// netdev are leaves; requester and responder see only leaves, the shared
// vocabulary rxe/verbs and the building blocks internal/ring and
// internal/sge, never rxe, netdev or each other; gopacket stays out of
// the library's hot path; nothing imports cmd but a command's own internal
// packages. A new package must be given a rule here.
var rules = map[string]rule{
	"":                  {},
	"packet":            {},
	"packet/layers":     {allow: append([]string{module + "/packet"}, gopacket...)},
	"retry":             {},
	"netdev":            {allow: sockets},
	"netdev/...":        {allow: slices.Concat([]string{module + "/netdev", module + "/packet", module + "/packet/layers"}, sockets, gopacket)},
	"rxe/verbs":         {},
	"rxe/cm":            {allow: []string{module + "/packet"}},
	"requester":         {allow: vocab},
	"responder":         {allow: vocab},
	"rxe":               {allow: slices.Concat([]string{module + "/packet", module + "/retry", module + "/rxe/...", module + "/netdev/...", module + "/requester", module + "/responder", module + "/internal/ring"}, sockets)},
	"rxe/...":           {allow: slices.Concat([]string{module + "/packet", module + "/retry", module + "/rxe/verbs", module + "/netdev/...", module + "/requester", module + "/responder", module + "/internal/ring"}, sockets)},
	"cmd/...":           {allow: slices.Concat([]string{module + "/..."}, gopacket, sockets, []string{"golang.org/x/term"})},
	"internal/...":      {allow: []string{module + "/packet", module + "/retry"}},
	"internal/netns":    {allow: sockets}, // test support: joins namespaces with setns
	"internal/cmsgtest": {allow: sockets}, // test support: reads a test socket's control messages
	"internal/ring":     {},
	"internal/sge":      {allow: []string{module + "/packet", module + "/rxe/verbs", "golang.org/x/sys/cpu"}},
	"examples/...":      {allow: []string{module + "/rxe", module + "/rxe/...", module + "/netdev/..."}},
	"testdata/...":      {},
	"docs/...":          {},
	".ci/...":           {},
	"cmd/rxectl/...":    {allow: slices.Concat([]string{module + "/..."}, gopacket, sockets, []string{"golang.org/x/term"})},
	// rxectl's parts: the command table sees the commands; the report,
	// the exchange, the plots and the argument helpers are leaves below
	// the perftest commands; dump reads captures with packet's parsers.
	"cmd/rxectl":                        {allow: []string{rxectl + "cli", rxectl + "dump", rxectl + "perftest", rxectl + "trace"}},
	"cmd/rxectl/internal/flows":         {allow: []string{module + "/packet"}},
	"cmd/rxectl/internal/ladder":        {allow: []string{rxectl + "flows", rxectl + "plot", module + "/packet"}},
	"cmd/rxectl/internal/trace":         {allow: []string{rxectl + "cli", rxectl + "flows", rxectl + "ladder"}},
	"cmd/rxectl/internal/cli":           {},
	"cmd/rxectl/internal/report":        {allow: []string{module + "/netdev/faults"}},
	"cmd/rxectl/internal/oob":           {allow: []string{rxectl + "report"}},
	"cmd/rxectl/internal/plot":          {},
	"cmd/rxectl/internal/plot/plottest": {allow: []string{rxectl + "plot"}},
	"cmd/rxectl/internal/dump":          {allow: slices.Concat([]string{rxectl + "cli", rxectl + "flows", rxectl + "ladder", module + "/packet"}, gopacket)},
	"cmd/rxectl/internal/perftest":      {allow: []string{rxectl + "cli", rxectl + "dump", rxectl + "flows", rxectl + "ladder", rxectl + "oob", rxectl + "report", rxectl + "plot", module + "/rxe", module + "/netdev", module + "/netdev/faults", module + "/netdev/pcapdump"}},
}

// rxectl is the import path prefix of rxectl's internal packages.
const rxectl = module + "/cmd/rxectl/internal/"

func match(pattern, path string) bool {
	if p, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == p || strings.HasPrefix(path, p+"/")
	}
	return pattern == path
}

func ruleFor(rel string) (rule, bool) {
	if r, ok := rules[rel]; ok {
		return r, true
	}
	best, found := "", false
	for p := range rules {
		if strings.HasSuffix(p, "/...") && match(p, rel) && len(p) > len(best) {
			best, found = p, true
		}
	}
	return rules[best], found
}

func allowed(r rule, imp string) bool {
	if !strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") {
		return true // standard library
	}
	for _, a := range r.allow {
		if match(a, imp) {
			return true
		}
	}
	return false
}

// TestLayering enforces the dependency rule on every package of the module.
func TestLayering(t *testing.T) {
	var checked int
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		pkg, err := build.ImportDir(path, 0)
		if err != nil {
			if _, ok := err.(*build.NoGoError); ok {
				return nil
			}
			return err
		}
		rel := filepath.ToSlash(path)
		if rel == "." {
			rel = ""
		}
		r, ok := ruleFor(rel)
		require.True(t, ok, "package %q has no layering rule: add one to layering_test.go", rel)
		checked++
		for _, imp := range pkg.Imports {
			require.True(t, allowed(r, imp), "%s must not import %s (see DEVELOPERS.md, Layout)", module+"/"+rel, imp)
			inCmd := strings.HasPrefix(imp, module+"/cmd")
			ownParts := strings.HasPrefix(rel, "cmd/rxectl") && strings.HasPrefix(imp, rxectl)
			require.False(t, inCmd && !ownParts, "nothing imports cmd but a command's own parts: %s imports %s", rel, imp)
			require.NotEqual(t, "github.com/google/gopacket/pcap", imp, "gopacket/pcap needs cgo")
		}
		for _, imp := range slices.Concat(pkg.TestImports, pkg.XTestImports) {
			require.NotEqual(t, "github.com/google/gopacket/pcap", imp, "gopacket/pcap needs cgo")
		}
		return nil
	})
	require.NoError(t, err)
	require.Positive(t, checked)
}

// TestLayeringRules checks the rule table itself against known violations,
// so that a permissive mistake in it cannot pass unnoticed.
func TestLayeringRules(t *testing.T) {
	tests := []struct {
		pkg, imp string
		ok       bool
	}{
		{"packet", "encoding/binary", true},
		{"packet", "github.com/google/gopacket", false},
		{"packet", module + "/retry", false},
		{"packet/layers", "github.com/google/gopacket/layers", true},
		{"retry", module + "/packet", false},
		{"netdev", "golang.org/x/net/ipv4", true},
		{"netdev", module + "/packet", false},
		{"requester", module + "/packet", true},
		{"requester", module + "/rxe/verbs", true},
		{"requester", module + "/responder", false},
		{"requester", module + "/rxe", false},
		{"requester", module + "/netdev", false},
		{"responder", module + "/requester", false},
		{"responder", "golang.org/x/sys/unix", false},
		{"responder", "github.com/stretchr/testify/require", false},
		{"rxe", module + "/netdev", true},
		{"rxe", module + "/cmd/rxectl", false},
		{"rxe", "github.com/google/gopacket", false},
		{"cmd/rxectl", module + "/packet/layers", false},
		{"cmd/rxectl", rxectl + "perftest", true},
		{"cmd/rxectl/internal/dump", module + "/packet", true},
		{"cmd/rxectl/internal/dump", module + "/rxe", false},
		{"cmd/rxectl/internal/oob", module + "/rxe", false},
		{"cmd/rxectl/internal/cli", module + "/packet", false},
		{"cmd/rxectl/internal/flows", module + "/packet", true},
	}
	for _, tc := range tests {
		r, ok := ruleFor(tc.pkg)
		require.True(t, ok, tc.pkg)
		require.Equal(t, tc.ok, allowed(r, tc.imp), "%s -> %s", tc.pkg, tc.imp)
	}
}
