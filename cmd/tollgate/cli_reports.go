package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
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
			customer := fs.String("customer", "", "customer id (required)")
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
				path := "/admin/v1/customers/" + seg(*customer) + "/statements/" + seg(*period) + query("format", *format)
				if *format == "csv" || *output != "" {
					return c.download(path, *output, false)
				}
				var st ledger.Statement
				return c.call("GET", path, nil, &st, func() { c.showStatement(st) })
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
				if err := requireFlags("from", *from, "to", *to); err != nil {
					return err
				}
				for name, v := range map[string]string{"from": *from, "to": *to} {
					if _, err := parseWhen(name, v); err != nil {
						return err
					}
				}
				return c.download("/admin/v1/export"+query("from", *from, "to", *to), *output, *progress || isTerminal(c.stderr))
			}
		},
	}}
}

// download streams a GET's answer to output ("" or "-": stdout), showing
// progress on stderr when show is set. A file appears only complete: it is
// written beside output under a temporary name (mode 0600, as ledger data
// should be) and renamed when the answer has been read to its end.
func (c *cli) download(path, output string, show bool) error {
	resp, err := c.api.open(c.ctx, "GET", path, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var dst io.Writer = c.stdout
	var tmp *os.File
	if output != "" && output != "-" {
		if tmp, err = os.CreateTemp(filepath.Dir(output), "."+filepath.Base(output)+".*.partial"); err != nil {
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
	p := newProgress(c.stderr, show, time.Now)
	n, err := io.Copy(io.MultiWriter(dst, p), resp.Body)
	p.finish()
	if err != nil {
		return fmt.Errorf("the download stopped after %d bytes: %w", n, err)
	}
	if tmp == nil {
		return nil
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", output, err)
	}
	if err := os.Rename(tmp.Name(), output); err != nil {
		return fmt.Errorf("write %s: %w", output, err)
	}
	tmp = nil
	c.warn(fmt.Sprintf("Wrote %s (%s) to %s.", plural(p.dataRows(), "row"), byteSize(n), output))
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
