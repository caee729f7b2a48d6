package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/ledger"
)

// TestCLITableAlignsWideText: a table's columns line up on a terminal
// when a cell holds East Asian wide characters (two columns each) or
// combining marks (none): tabwriter counted runes, so a customer named
// 株式会社 pushed every column after it four places right of the others.
func TestCLITableAlignsWideText(t *testing.T) {
	var out bytes.Buffer
	c := &cli{stdout: &out}
	c.table([]string{"ID", "NAME", "CURRENCY"}, [][]string{
		{"1", "株式会社", "USD"},
		{"2", "bigmoney", "USD"},
		{"3", "cafe\u0301", "EUR"},
	})
	want := "ID  NAME      CURRENCY\n" +
		"1   株式会社  USD\n" +
		"2   bigmoney  USD\n" +
		"3   cafe\u0301      EUR\n"
	if out.String() != want {
		t.Fatalf("table:\n%s\nwant:\n%s", out.String(), want)
	}
}

// TestCLIReconcileSaysWhenUnpricedModelsAreLeftOut: `tollgate reconcile`
// says that its unpriced-model table is the models of the most events and
// how many there are, when the reconciliation listed only some of them
// (ledger.MaxListed), and says nothing of the kind when it listed all.
func TestCLIReconcileSaysWhenUnpricedModelsAreLeftOut(t *testing.T) {
	for _, tc := range []struct {
		models int64
		want   bool
	}{{2, false}, {1500, true}} {
		var out, errOut bytes.Buffer
		c := &cli{stdout: &out, stderr: &errOut}
		c.showReconciliation(ledger.Reconciliation{Clean: true, UnpricedModels: tc.models, UnpricedEvents: 3000,
			Unpriced: []ledger.UnpricedModel{{Model: "a", Events: 1000}, {Model: "b", Events: 2}}})
		said := strings.Contains(out.String(), "the 2 models of the most events, of 1500 models; 3000 events in all")
		if said != tc.want || !strings.Contains(out.String(), "Unpriced events by model") {
			t.Errorf("%d unpriced models, 2 listed: said they were left out %v, want %v:\n%s", tc.models, said, tc.want, out.String())
		}
	}
}

// TestCLIReconcileCountsLateRowsInWords: the late rows' line says "1
// entry" and "1 event", not "1 entries" (a walk-through of the docs).
func TestCLIReconcileCountsLateRowsInWords(t *testing.T) {
	for _, tc := range []struct {
		events, entries int64
		want            string
	}{{0, 1, "0 events, 1 entry"}, {1, 2, "1 event, 2 entries"}} {
		var out bytes.Buffer
		c := &cli{stdout: &out, stderr: &out}
		c.showReconciliation(ledger.Reconciliation{Clean: true, LateEvents: tc.events, LateEntries: tc.entries})
		if !strings.Contains(out.String(), tc.want) {
			t.Errorf("%d late events, %d late entries: want %q in:\n%s", tc.events, tc.entries, tc.want, out.String())
		}
	}
}
