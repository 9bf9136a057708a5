package rxe

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestVerbsReexported: every exported constant and type of package
// rxe/verbs (the vocabulary the engines produce and users compare with)
// has a name of its own in package rxe, so that users import only rxe.
func TestVerbsReexported(t *testing.T) {
	names := func(dir string) map[string]bool {
		fset := token.NewFileSet()
		pkgs, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool {
			return !strings.HasSuffix(fi.Name(), "_test.go")
		}, 0)
		require.NoError(t, err)
		out := map[string]bool{}
		for _, p := range pkgs {
			for _, f := range p.Files {
				for _, d := range f.Decls {
					g, ok := d.(*ast.GenDecl)
					if !ok || g.Tok != token.CONST && g.Tok != token.TYPE {
						continue
					}
					for _, s := range g.Specs {
						switch s := s.(type) {
						case *ast.ValueSpec:
							for _, n := range s.Names {
								out[n.Name] = n.IsExported()
							}
						case *ast.TypeSpec:
							out[s.Name.Name] = s.Name.IsExported()
						}
					}
				}
			}
		}
		return out
	}
	ours := names(".")
	var missing []string
	for n, exported := range names("verbs") {
		if exported && !ours[n] {
			missing = append(missing, n)
		}
	}
	require.Empty(t, missing, "rxe/verbs names with no re-export in rxe")
}
