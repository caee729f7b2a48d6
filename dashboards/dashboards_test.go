package dashboards

import (
	"encoding/json"
	"io/fs"
	"strings"
	"testing"
)

// Datasource uids and the plugin types they are provisioned with.
var datasourceTypes = map[string]string{
	"prometheus": "prometheus",
	"postgres":   "grafana-postgresql-datasource",
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type target struct {
	RefID      string      `json:"refId"`
	Datasource *datasource `json:"datasource"`
	Expr       string      `json:"expr"`
	Legend     string      `json:"legendFormat"`
	RawSQL     string      `json:"rawSql"`
	RawQuery   bool        `json:"rawQuery"`
	Format     string      `json:"format"`
}

type panel struct {
	ID         int                       `json:"id"`
	Type       string                    `json:"type"`
	Title      string                    `json:"title"`
	Datasource *datasource               `json:"datasource"`
	Targets    []target                  `json:"targets"`
	GridPos    *struct{ H, W, X, Y int } `json:"gridPos"`
	Panels     []panel                   `json:"panels"` // a collapsed row's panels
}

type variable struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Datasource *datasource     `json:"datasource"`
	Query      json.RawMessage `json:"query"`
}

type dashboard struct {
	file          string
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []variable `json:"list"`
	} `json:"templating"`
}

// query is one query found in a dashboard, with where it was found.
type query struct {
	where, uid, text string
}

// queryText returns a variable's query: a string, or an object's "query".
func (v variable) queryText() string {
	var s string
	if json.Unmarshal(v.Query, &s) == nil {
		return s
	}
	var o struct{ Query string }
	_ = json.Unmarshal(v.Query, &o)
	return o.Query
}

func loadDashboards(t *testing.T) []dashboard {
	t.Helper()
	names, err := fs.Glob(FS, "*.json")
	if err != nil || len(names) == 0 {
		t.Fatalf("no dashboards embedded: %v", err)
	}
	var ds []dashboard
	for _, name := range names {
		b, err := FS.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		d := dashboard{file: name}
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ds = append(ds, d)
	}
	return ds
}

// leafPanels returns the panels that show data: rows' panels, not rows.
func (d dashboard) leafPanels() []panel {
	var out []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			out = append(out, p)
		}
	}
	walk(d.Panels)
	return out
}

// queries returns every panel target's and template variable's query.
func (d dashboard) queries() []query {
	var qs []query
	for _, p := range d.leafPanels() {
		for _, tg := range p.Targets {
			text := tg.Expr
			if p.Datasource != nil && p.Datasource.UID == "postgres" {
				text = tg.RawSQL
			}
			qs = append(qs, query{d.file + `: panel "` + p.Title + `" ` + tg.RefID, p.Datasource.UID, text})
		}
	}
	for _, v := range d.Templating.List {
		if v.Type == "query" && v.Datasource != nil {
			qs = append(qs, query{d.file + ": variable $" + v.Name, v.Datasource.UID, v.queryText()})
		}
	}
	return qs
}

func TestDashboardStructure(t *testing.T) {
	uids := map[string]string{}
	for _, d := range loadDashboards(t) {
		switch {
		case d.UID == "" || d.Title == "":
			t.Errorf("%s: uid and title are required", d.file)
		case d.SchemaVersion < 39:
			t.Errorf("%s: schemaVersion %d, want >= 39", d.file, d.SchemaVersion)
		case uids[d.UID] != "":
			t.Errorf("%s: uid %q is also %s's", d.file, d.UID, uids[d.UID])
		}
		uids[d.UID] = d.file
		ids := map[int]bool{}
		var walk func([]panel)
		walk = func(ps []panel) {
			for _, p := range ps {
				if ids[p.ID] || p.ID == 0 {
					t.Errorf("%s: panel %q: id %d is missing or not unique", d.file, p.Title, p.ID)
				}
				ids[p.ID] = true
				if g := p.GridPos; g == nil || g.W < 1 || g.H < 1 || g.X < 0 || g.X+g.W > 24 {
					t.Errorf("%s: panel %q: bad gridPos %+v", d.file, p.Title, g)
				}
				walk(p.Panels)
			}
		}
		walk(d.Panels)
		leaves := d.leafPanels()
		if len(leaves) == 0 {
			t.Errorf("%s: no panels", d.file)
		}
		for _, p := range leaves {
			where := d.file + `: panel "` + p.Title + `"`
			if p.Title == "" {
				t.Errorf("%s: a %s panel has no title", d.file, p.Type)
			}
			if !knownDatasource(p.Datasource) {
				t.Errorf("%s: datasource %+v is not a provisioned one", where, p.Datasource)
				continue
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s: no targets", where)
			}
			for _, tg := range p.Targets {
				if tg.Datasource != nil && *tg.Datasource != *p.Datasource {
					t.Errorf("%s %s: target datasource %+v differs from the panel's", where, tg.RefID, tg.Datasource)
				}
				switch p.Datasource.UID {
				case "prometheus":
					if strings.TrimSpace(tg.Expr) == "" {
						t.Errorf("%s %s: empty expr", where, tg.RefID)
					}
				case "postgres":
					if strings.TrimSpace(tg.RawSQL) == "" || !tg.RawQuery {
						t.Errorf("%s %s: want a raw query with rawSql", where, tg.RefID)
					}
					if tg.Format != "table" && tg.Format != "time_series" {
						t.Errorf("%s %s: format %q, want table or time_series", where, tg.RefID, tg.Format)
					}
				}
			}
		}
		for _, v := range d.Templating.List {
			if v.Datasource != nil && !knownDatasource(v.Datasource) {
				t.Errorf("%s: variable $%s: datasource %+v is not a provisioned one", d.file, v.Name, v.Datasource)
			}
		}
	}
	for _, want := range []string{"tollgate-operations", "tollgate-billing"} {
		if uids[want] == "" {
			t.Errorf("no dashboard with uid %s", want)
		}
	}
}

func knownDatasource(ds *datasource) bool {
	return ds != nil && datasourceTypes[ds.UID] != "" && datasourceTypes[ds.UID] == ds.Type
}

// TestTokenSumsDoNotCountAClassTwice: cached tokens are part of the
// prompt and reasoning tokens part of the completion
// (tollgate_gateway_tokens_total's help), so a query summing the token
// counter over its classes must keep them apart (by class) or take prompt
// and completion alone; "Tokens / s by model" summed every class, 44%
// over the ledger's tokens (an observability review).
func TestTokenSumsDoNotCountAClassTwice(t *testing.T) {
	for _, d := range loadDashboards(t) {
		for _, q := range d.queries() {
			if !strings.Contains(q.text, "tollgate_gateway_tokens_total") || strings.Contains(q.text, "by (class)") {
				continue
			}
			if !strings.Contains(q.text, `class=`) && !strings.Contains(q.text, `class=~"prompt|completion"`) {
				t.Errorf("%s sums every token class, counting cached and reasoning tokens twice: %s", q.where, q.text)
			}
		}
	}
}
