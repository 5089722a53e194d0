// Package lint holds the repository's own checks, run by `make test`
// beside go vet and staticcheck (staticcheck.conf): what neither catches
// and this project cares about.
package lint

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// errName matches the names errors go by here: err, derr, e.err, p.Err.
var errName = regexp.MustCompile(`^[a-z]*[eE]rr$`)

// verbs lists the verbs of a format string, one per argument it takes
// (%% takes none; * widths are not used in this repository).
func verbs(format string) []byte {
	var out []byte
	for i := 0; i < len(format); i++ {
		if format[i] != '%' {
			continue
		}
		i++
		for i < len(format) && strings.IndexByte("+-# 0123456789.[]", format[i]) >= 0 {
			i++
		}
		if i < len(format) && format[i] != '%' {
			out = append(out, format[i])
		}
	}
	return out
}

// TestErrorsWrapWithW: an fmt.Errorf that formats an error value with %v
// or %s loses it for errors.Is and errors.As; %w keeps it (several %w in
// one call are fine). A deliberate exception (an error that must not be
// matched) formats err.Error(). Tests are left out: their messages quote
// errors, they do not return them.
func TestErrorsWrapWithW(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n != "." && n != ".." && (strings.HasPrefix(n, ".") || n == "testdata" || n == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, ".pb.go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) < 2 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Errorf" {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "fmt" {
				return true
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			format, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			for i, v := range verbs(format) {
				if i+1 >= len(call.Args) || (v != 'v' && v != 's') {
					continue
				}
				var name string
				switch a := call.Args[i+1].(type) {
				case *ast.Ident:
					name = a.Name
				case *ast.SelectorExpr:
					// Exported Err fields here are messages (wire.Completion.Err).
					if a.Sel.Name != "Err" {
						name = a.Sel.Name
					}
				}
				if errName.MatchString(name) {
					t.Errorf("%s: fmt.Errorf formats error %s with %%%c: wrap it with %%w", fset.Position(call.Pos()), name, v)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
