package main

import (
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/ledger/api"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// dlqCommands are `tollgate dlq ...`: usage events the meter worker set
// aside, their replay, and their removal.
func dlqCommands() []*command {
	return []*command{{
		name: "dlq list", args: "[--limit N] [--cursor C | --all]",
		summary: "list usage events set aside in the dead-letter stream, oldest first, a page at a time, with why (GET /admin/v1/dlq)",
		example: "tollgate dlq list --limit 20\n  tollgate dlq list --limit 20 --cursor 20\n  tollgate dlq list --all --json",
		flags: func(fs *flag.FlagSet) func(*cli, []string) error {
			limit := fs.Int("limit", api.DefaultDeadLetterLimit, "dead letters per page (1 to 10000)")
			cursor := fs.String("cursor", "", "the page of dead letters after a previous page: its next_cursor (the sequence it ended with)")
			all := fs.Bool("all", false, "every dead letter, read --limit at a time")
			return func(c *cli, _ []string) error {
				if *all && *cursor != "" {
					return usagef("give --cursor or --all, not both")
				}
				if *limit < 1 || *limit > api.MaxDeadLetterLimit {
					return usagef("--limit: %d is not from 1 to %d (dead letters per page)", *limit, api.MaxDeadLetterLimit)
				}
				var page api.DeadLetterPage
				var err error
				if *all {
					page.Data, err = c.api.AllDeadLetters(c.ctx, *limit, "")
				} else {
					page, err = c.api.DeadLettersPage(c.ctx, *limit, *cursor)
				}
				if page.Data == nil {
					page.Data = []usage.DeadLetter{}
				}
				return c.show(page, err, func() {
					rows := make([][]string, len(page.Data))
					for i, l := range page.Data {
						rows[i] = []string{strconv.FormatUint(l.Seq, 10), ts(&l.Time), dash(l.EventID), l.Reason}
					}
					c.table([]string{"SEQ", "TIME", "EVENT", "REASON"}, rows)
					if page.NextCursor != "" {
						c.warn("More dead letters follow: add --cursor " + page.NextCursor + ", or --all for every dead letter.")
					}
				})
			}
		},
	}, {
		name: "dlq replay", args: "(--seq N[,N...] | --all) [--progress]",
		summary:     "send dead letters back to the usage stream once the cause is fixed, a group set aside whole as its events (POST /admin/v1/dlq/replay)",
		interrupted: "the dead letters replayed before it are out of the dead-letter stream; run it again to replay the rest",
		example:     "tollgate dlq replay --seq 3,4",
		flags: func(fs *flag.FlagSet) func(*cli, []string) error {
			seqs := fs.String("seq", "", "comma-separated sequences, as dlq list shows them")
			all := fs.Bool("all", false, "replay every dead letter")
			progress := fs.Bool("progress", false, "report how many are replayed, once a second, on stderr even when it is not a terminal")
			return func(c *cli, _ []string) error {
				if *seqs != "" && *all {
					return usagef("give --seq or --all, not both")
				}
				if *seqs == "" && !*all {
					return usagef("give --seq or --all")
				}
				var replay []uint64
				for _, v := range strings.Split(*seqs, ",") {
					if v = strings.TrimSpace(v); v == "" {
						continue
					}
					n, err := strconv.ParseUint(v, 10, 64)
					if err != nil {
						return usagef("--seq: %q is not a sequence number", v)
					}
					if n == 0 { // JetStream refuses it as a bad request
						return usagef("--seq: sequences start at 1, as dlq list shows them")
					}
					replay = append(replay, n)
				}
				if !*all && len(replay) == 0 { // not every dead letter by mistake
					return usagef("--seq: %q names no sequence", *seqs)
				}
				tty := isTerminal(c.stderr)
				var report func(done, total int)
				drawn := false // a line redrawn in place, to end
				if *progress || tty {
					start := time.Now()
					report = func(done, total int) {
						rate := 0.0
						if s := time.Since(start).Seconds(); s > 0 {
							rate = float64(done) / s
						}
						line := fmt.Sprintf("%d of %d dead letters replayed, %.0f/s", done, total, rate)
						if tty {
							fmt.Fprintf(c.stderr, "\r\033[K%s", line)
							drawn = true
						} else {
							fmt.Fprintln(c.stderr, line)
						}
					}
				}
				n, err := c.api.ReplayDeadLettersProgress(c.ctx, replay, report)
				if drawn {
					fmt.Fprintln(c.stderr)
				}
				return c.show(map[string]int{"replayed": n}, err, func() {
					fmt.Fprintf(c.stdout, "replayed %s\n", deadLetters(n))
				})
			}
		},
	}, {
		name: "dlq remove", args: "--seq N [--seq M...] --yes",
		summary: "remove dead letters for good, without replaying them: their usage is never billed; the server logs each with its data (POST /admin/v1/dlq/remove)",
		example: "tollgate dlq remove --seq 3 --yes",
		flags: func(fs *flag.FlagSet) func(*cli, []string) error {
			var seqs seqList
			fs.Var(&seqs, "seq", "a sequence, as dlq list shows it (repeat it, or N,M, for more)")
			yes := fs.Bool("yes", false, "remove them: their usage is dropped from billing for good")
			return func(c *cli, _ []string) error {
				if len(seqs) == 0 {
					return usagef("give --seq N (dlq list shows them); there is no remove-all")
				}
				if !*yes {
					return usagef("removing drops the dead letters' usage from billing for good: check them with dlq list, then add --yes")
				}
				n, err := c.api.RemoveDeadLetters(c.ctx, seqs)
				return c.show(map[string]int{"removed": n}, err, func() {
					done := slices.Compact(slices.Sorted(slices.Values(seqs)))
					names := make([]string, len(done))
					for i, s := range done {
						names[i] = strconv.FormatUint(s, 10)
					}
					fmt.Fprintf(c.stdout, "removed %s: %s\n", deadLetters(n), strings.Join(names, ", "))
				})
			}
		},
	}}
}

// seqList is a --seq flag given once or more, each a sequence or several
// comma-separated; 0, which JetStream refuses, is refused here.
type seqList []uint64

func (l *seqList) String() string { return fmt.Sprint([]uint64(*l)) }

func (l *seqList) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not a sequence number", s)
		}
		if n == 0 {
			return fmt.Errorf("sequences start at 1, as dlq list shows them")
		}
		*l = append(*l, n)
	}
	return nil
}

// deadLetters is n dead letters, in words: "1 dead letter", "2 dead
// letters".
func deadLetters(n int) string {
	if n == 1 {
		return "1 dead letter"
	}
	return fmt.Sprintf("%d dead letters", n)
}
