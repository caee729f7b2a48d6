package ledger

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestUsageGroupingsAreDocumented: the group_by values README.md's usage
// row and the OpenAPI GroupBy parameter list are the ones Usage accepts
// (deployment and provider were missing from the README).
func TestUsageGroupingsAreDocumented(t *testing.T) {
	var want []string
	for g := range usageGroups {
		want = append(want, g)
	}
	slices.Sort(want)

	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var row string
	for line := range strings.SplitSeq(string(readme), "\n") {
		if strings.HasPrefix(line, "| `GET …/usage?") {
			row = line
		}
	}
	_, list, ok := strings.Cut(row, "group_by=")
	list, _, _ = strings.Cut(list, "&")
	readmeGroups := strings.Split(list, `\|`)
	slices.Sort(readmeGroups)
	if !ok || !slices.Equal(readmeGroups, want) {
		t.Errorf("README's usage row lists group_by %q, want %q", readmeGroups, want)
	}

	spec, err := os.ReadFile("api/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Parameters map[string]struct {
				Schema struct{ Enum []string }
			}
		}
	}
	if err := json.Unmarshal(spec, &doc); err != nil {
		t.Fatal(err)
	}
	enum := slices.Clone(doc.Components.Parameters["GroupBy"].Schema.Enum)
	slices.Sort(enum)
	if !slices.Equal(enum, want) {
		t.Errorf("openapi.json's GroupBy enum is %q, want %q", enum, want)
	}
}
