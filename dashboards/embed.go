// Package dashboards holds Tollgate's Grafana dashboards: operations.json
// (Prometheus: gateway traffic and the metering pipeline) and billing.json
// (Postgres: revenue, token mix, pricing gaps and credit from the ledger).
// Datasources are referred to by uid: "prometheus" and "postgres", as
// deploy/grafana/provisioning defines them. Its tests parse the panels'
// PromQL with Prometheus' parser and check it against the metric registry a
// Tollgate process serves, run the SQL against a real, filled ledger
// database, and validate docker-compose.yaml and deploy/.
package dashboards

import "embed"

// FS holds the dashboard JSON files.
//
//go:embed *.json
var FS embed.FS
