package ledger_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestOnlyTheLedgerImportsPgx holds the layering README's Layout and
// docs/architecture.md state: of the product's packages, the ledger
// alone imports pgx (the meter and the admin API reach Postgres through
// it), and the ledger imports no gateway or meter package but the usage
// contract. The load, fault and shard tools in cmd talk to Postgres on
// their own, as an operator's scripts would; tests are not counted.
// `tollgate config check` once imported pgxpool to parse a database URL
// (ledger.CheckURL now).
func TestOnlyTheLedgerImportsPgx(t *testing.T) {
	const mod = "github.com/tollgate-dev/tollgate/"
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", mod+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	tools := map[string]bool{"cmd/loadgen": true, "cmd/faults": true, "cmd/shardbench": true}
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], mod)
		for _, imp := range fields[1:] {
			own := strings.TrimPrefix(imp, mod)
			switch {
			case strings.HasPrefix(imp, "github.com/jackc/pgx") && !tools[pkg] && pkg != "ledger" && pkg != "ledger/ledgertest":
				t.Errorf("%s imports %s: only the ledger talks to Postgres", pkg, imp)
			case strings.HasPrefix(pkg, "ledger") && own != imp && (strings.HasPrefix(own, "gateway") ||
				strings.HasPrefix(own, "meter") && own != "meter/usage" && !strings.HasPrefix(own, "meter/usage/")):
				t.Errorf("%s imports %s: the ledger depends on the usage contract alone", pkg, imp)
			}
		}
	}
}
