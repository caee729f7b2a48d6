package dashboards

import (
	"os"
	"strings"
	"testing"
)

// TestOperationsGuideNamesTheDashboards: docs/operations.md tells an
// operator which Grafana dashboards to open by their titles, as Grafana's
// search and its Tollgate folder list them; it named "Tollgate operations"
// and "Tollgate billing", which Grafana's search does not find (the titles
// are "Tollgate / Operations" and "Tollgate / Billing").
func TestOperationsGuideNamesTheDashboards(t *testing.T) {
	guide, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range loadDashboards(t) {
		if !strings.Contains(string(guide), `"`+d.Title+`"`) {
			t.Errorf("docs/operations.md does not name %s by its title, %q", d.file, d.Title)
		}
	}
}
