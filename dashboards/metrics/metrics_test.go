package metrics

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestDeadLettersStartAtZero: every reason's series exists before the
// first dead letter, so that increase() sees the first one.
func TestDeadLettersStartAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMeter(reg)
	got := deadLetters(t, reg)
	for _, r := range DeadLetterReasons {
		if v, ok := got[r]; !ok || v != 0 {
			t.Errorf("reason %q: series present %v, value %v; want 0 from the start", r, ok, v)
		}
	}
	m.DeadLetter("refused")
	m.BatchWritten(3, 2, time.Millisecond)
	if got := deadLetters(t, reg); got["refused"] != 1 || got["undecodable"] != 0 || len(got) != len(DeadLetterReasons) {
		t.Errorf("after one refused: %v", got)
	}
}

func deadLetters(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "tollgate_meter_dead_letters_total" {
			continue
		}
		for _, s := range mf.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "reason" {
					out[l.GetValue()] = s.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// TestDeadLetterReasonsAreMeters: DeadLetterReasons is exactly the set of
// reasons the meter package reports (its DeadLetter("…") calls), so that
// a new reason cannot go without its series at 0.
func TestDeadLetterReasonsAreMeters(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "meter", "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("meter's sources: %v", err)
	}
	fset := token.NewFileSet()
	var used []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if sel, ok := call.Fun.(*ast.SelectorExpr); !ok || sel.Sel.Name != "DeadLetter" || len(call.Args) != 1 {
				return true
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				t.Errorf("%s: DeadLetter with a reason that is not a string literal", fset.Position(call.Pos()))
				return true
			}
			r, _ := strconv.Unquote(lit.Value)
			used = append(used, r)
			return true
		})
	}
	slices.Sort(used)
	used = slices.Compact(used)
	want := slices.Sorted(slices.Values(DeadLetterReasons))
	if !slices.Equal(used, want) {
		t.Errorf("meter reports dead letters for %v; DeadLetterReasons is %v", used, want)
	}
}
