// Package migrations holds Tollgate's goose SQL migrations, embedded in the
// binary so that `tollgate migrate` and `tollgate serve` apply them with no
// files on disk.
package migrations

import "embed"

// FS holds the migration files, named NNNNN_description.sql in goose's format.
//
//go:embed *.sql
var FS embed.FS
