package main

import (
	"bytes"
	"testing"
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
