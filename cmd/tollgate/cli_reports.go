package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/tollgate-dev/tollgate/ledger/api"
)

// reportCommands are statements get and export: documents for finance,
// streamed to a file or stdout.
func reportCommands() []*command {
	return []*command{{
		name: "statements get", args: "--customer ID --period YYYY-MM [--format json|csv] [--output FILE]",
		summary: "a customer's statement for a month (GET /admin/v1/customers/{id}/statements/{period})",
		example: "tollgate statements get --customer 0197a3c2-… --period 2026-01\n" +
			"  tollgate statements get --customer 0197a3c2-… --period 2026-01 --format csv --output acme-2026-01.csv",
		flags: func(fs *flag.FlagSet) func(*cli, []string) error {
			customer := idFlag(fs, "customer", "customer id (required)")
			period := fs.String("period", "", "month, YYYY-MM (required)")
			format := fs.String("format", "json", "json or csv")
			output := fs.String("output", "", "write the statement to FILE, as the API sends it (default: stdout)")
			return func(c *cli, _ []string) error {
				if err := requireFlags("customer", *customer, "period", *period); err != nil {
					return err
				}
				if _, err := time.Parse("2006-01", *period); err != nil {
					return usagef("--period: %q is not a month like 2026-01", *period)
				}
				if *format != "json" && *format != "csv" {
					return usagef("--format: %q is neither json nor csv", *format)
				}
				if *format == "csv" && c.json {
					return usagef("--json: with --format csv the statement is CSV; leave out one of them")
				}
				if *format == "csv" || *output != "" {
					return c.download(*output, false, *format == "csv", func(w io.Writer) (int64, error) {
						return c.api.WriteStatement(c.ctx, *customer, *period, *format, w)
					})
				}
				st, err := c.api.Statement(c.ctx, *customer, *period)
				return c.show(st, err, func() { c.showStatement(st) })
			}
		},
	}, {
		name: "export", args: "--from DATE --to DATE [--output FILE] [--progress]",
		summary: "stream the ledger's lines for a period as CSV (GET /admin/v1/export)",
		example: "tollgate export --from 2026-01-01 --to 2026-02-01 --output ledger-2026-01.csv",
		flags: func(fs *flag.FlagSet) func(*cli, []string) error {
			from := fs.String("from", "", "period start, RFC 3339 or YYYY-MM-DD (required)")
			to := fs.String("to", "", "period end, exclusive (required)")
			output := fs.String("output", "", "write the CSV to FILE (default: stdout)")
			progress := fs.Bool("progress", false, "report bytes, rows and rate on stderr even when it is not a terminal")
			return func(c *cli, _ []string) error {
				if c.json {
					return usagef("--json: export writes CSV, never JSON; leave out --json")
				}
				if err := requireFlags("from", *from, "to", *to); err != nil {
					return err
				}
				start, end, err := parseRange(*from, *to)
				if err != nil {
					return err
				}
				return c.download(*output, *progress || isTerminal(c.stderr), true, func(w io.Writer) (int64, error) {
					return c.api.Export(c.ctx, start, end, w)
				})
			}
		},
	}}
}

// download writes what fetch streams to output ("" or "-": stdout),
// showing progress on stderr when show is set; a file written is
// reported by its CSV rows when rows is set, else (a JSON document) by
// its size alone. A file appears only
// complete: it is written beside output under a temporary name (mode
// 0600, as ledger data should be) and renamed when fetch has returned it
// all.
func (c *cli) download(output string, show, rows bool, fetch func(io.Writer) (int64, error)) (err error) {
	var dst io.Writer = c.stdout
	var tmp *os.File
	if output != "" && output != "-" {
		if tmp, err = os.CreateTemp(filepath.Dir(output), "."+filepath.Base(output)+".*.partial"); err != nil {
			// Why, without the temporary file's name, which is not the operator's.
			if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
				err = pe.Err
			}
			return fmt.Errorf("create %s: %w", output, err)
		}
		defer func() {
			if tmp != nil {
				tmp.Close()
				os.Remove(tmp.Name())
			}
		}()
		dst = tmp
	}
	var report io.Writer
	if show {
		report = c.stderr
	}
	p := api.NewProgress(report, isTerminal(c.stderr), time.Now)
	n, err := fetch(io.MultiWriter(dst, p))
	if n > 0 || err == nil {
		p.Finish()
	}
	if err != nil || tmp == nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", output, err)
	}
	if err := os.Rename(tmp.Name(), output); err != nil {
		return fmt.Errorf("write %s: %w", output, err)
	}
	tmp = nil
	written := p.Size()
	if rows {
		written = p.Summary()
	}
	c.warn(fmt.Sprintf("Wrote %s to %s.", written, output))
	return nil
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
