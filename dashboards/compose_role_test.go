package dashboards

import (
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// roleScript is the init script that makes Tollgate's role; it runs before
// 10-grafana-reader.sql, which grants on that role's future tables.
const roleScript = "deploy/postgres/05-tollgate-role.sh"

// TestComposeAppRoleIsOrdinary: the ledger's integrity rests on triggers
// (append-only entries and events, TRUNCATE refused) that a superuser can
// switch off (session_replication_role = replica, DISABLE TRIGGER ALL), so
// the Tollgate services connect as an ordinary role that owns its
// database, made by deploy/postgres at initialisation, never as the
// image's superuser.
func TestComposeAppRoleIsOrdinary(t *testing.T) {
	p := loadCompose(t, "demo")
	pg := p.Services["postgres"]
	superuser := deref(pg.Environment["POSTGRES_USER"])
	if superuser == "" {
		superuser = "postgres" // the image's default
	}
	b, err := os.ReadFile(filepath.Join(repo, roleScript))
	if err != nil {
		t.Fatalf("%s: %v (postgres should make Tollgate's role at initialisation)", roleScript, err)
	}
	script := string(b)
	m := regexp.MustCompile(`CREATE ROLE (\w+) LOGIN PASSWORD :'(\w+)' NOSUPERUSER NOCREATEDB NOCREATEROLE`).FindStringSubmatch(script)
	if m == nil {
		t.Fatalf("%s: no CREATE ROLE … LOGIN PASSWORD :'var' NOSUPERUSER NOCREATEDB NOCREATEROLE", roleScript)
	}
	role, pwVar := m[1], m[2]
	// The password comes from the postgres service's environment, through
	// psql's -v (so that it is quoted as a literal).
	envVar := regexp.MustCompile(`-v ` + pwVar + `="\$(\w+)"`).FindStringSubmatch(script)
	if envVar == nil {
		t.Fatalf("%s: psql variable %s is not set from the environment (-v %s=\"$VAR\")", roleScript, pwVar, pwVar)
	}
	password := deref(pg.Environment[envVar[1]])
	if password == "" {
		t.Errorf("postgres: %s, the Tollgate role's password, is not set", envVar[1])
	}
	db := deref(pg.Environment["POSTGRES_DB"])
	if !strings.Contains(script, "ALTER DATABASE "+db+" OWNER TO "+role) &&
		!strings.Contains(script, `ALTER DATABASE "$POSTGRES_DB" OWNER TO `+role) {
		t.Errorf("%s: does not give database %s to %s", roleScript, db, role)
	}
	if role == superuser {
		t.Fatalf("%s makes %s, the superuser", roleScript, role)
	}
	for name := range tollgateRoles {
		u, err := url.Parse(deref(p.Services[name].Environment["TOLLGATE_DATABASE_URL"]))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		pw, _ := u.User.Password()
		switch {
		case u.User.Username() != role:
			t.Errorf("%s: connects as %q, want %s, the ordinary role (not the superuser %s)", name, u.User.Username(), role, superuser)
		case pw != password:
			t.Errorf("%s: the URL's password is not the postgres service's %s", name, envVar[1])
		case strings.TrimPrefix(u.Path, "/") != db:
			t.Errorf("%s: database %s, want POSTGRES_DB %s", name, u.Path, db)
		}
	}
	// Grafana's reader sees the tables that role makes later (migrations,
	// monthly partitions): default privileges are per creating role.
	reader, err := os.ReadFile(filepath.Join(repo, "deploy/postgres/10-grafana-reader.sql"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(reader), "ALTER DEFAULT PRIVILEGES FOR ROLE "+role+" IN SCHEMA public GRANT SELECT ON TABLES") {
		t.Errorf("10-grafana-reader.sql: no default SELECT on the tables %s makes", role)
	}
	if roleScript >= "deploy/postgres/10-grafana-reader.sql" {
		t.Errorf("%s must sort before 10-grafana-reader.sql, which names its role", roleScript)
	}
}
