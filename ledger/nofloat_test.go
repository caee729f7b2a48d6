package ledger_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// floatAllowed lists the floating-point uses on the money path's packages
// that touch no money, by file and the use's text.
var floatAllowed = map[string]string{
	// An Accept header's quality value (q=0.5), not an amount.
	filepath.Join("api", "rerate.go"): "strconv.ParseFloat",
}

// floatSQL matches a floating-point type in SQL text.
var floatSQL = regexp.MustCompile(`(?i)::\s*(float[48]?|real|double precision)\b|\bdouble precision\b|\bfloat[48]\b`)

// TestNoFloatingPointOnTheMoneyPath: "no floating point anywhere on the
// money path" (DESIGN.md, invariant 4; STYLE.md). The ledger's and the
// meter's code, and the migrations, use no float type, float literal,
// conversion to or from a float, or SQL float: a rate, a charge, a rollup or
// a balance computed in binary floating point is off by fractions of a
// micro-unit that no later rounding recovers, and no test of sums that
// happen to be exact would see it.
func TestNoFloatingPointOnTheMoneyPath(t *testing.T) {
	fset := token.NewFileSet()
	for _, root := range []string{".", filepath.Join("..", "meter")} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				var use string
				switch n := n.(type) {
				case *ast.Ident:
					if n.Name == "float32" || n.Name == "float64" {
						use = n.Name
					}
				case *ast.BasicLit:
					switch {
					case n.Kind == token.FLOAT:
						use = "the literal " + n.Value
					case n.Kind == token.STRING && floatSQL.MatchString(n.Value):
						use = "SQL " + floatSQL.FindString(n.Value)
					}
				case *ast.SelectorExpr:
					// reflect's Float kinds name a type, big.Rat's FloatString
					// writes an exact decimal: neither computes in floats.
					if x, ok := n.X.(*ast.Ident); ok && x.Name == "reflect" || n.Sel.Name == "FloatString" {
						break
					}
					if x, ok := n.X.(*ast.Ident); ok {
						sel := x.Name + "." + n.Sel.Name
						if strings.Contains(n.Sel.Name, "Float") || x.Name == "math" && !strings.HasPrefix(n.Sel.Name, "Max") &&
							!strings.HasPrefix(n.Sel.Name, "Min") {
							use = sel
						}
					} else if strings.Contains(n.Sel.Name, "Float") {
						use = "." + n.Sel.Name
					}
				}
				if use != "" && floatAllowed[path] != use {
					t.Errorf("%s: %s: floating point on the money path", fset.Position(n.Pos()), use)
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	migrations, err := filepath.Glob(filepath.Join("..", "migrations", "*.sql"))
	if err != nil || len(migrations) == 0 {
		t.Fatalf("no migrations found (%v)", err)
	}
	for _, path := range migrations {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if code, _, _ := strings.Cut(line, "--"); floatSQL.MatchString(code) {
				t.Errorf("%s:%d: SQL %s: floating point on the money path", path, i+1, floatSQL.FindString(code))
			}
		}
	}
}
