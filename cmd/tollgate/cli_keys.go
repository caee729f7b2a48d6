package main

import (
	"flag"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
)

// keyLimitFlags are the flags of a key's limits, shared by `keys create`
// and `keys update`.
type keyLimitFlags struct {
	daily, monthly, rpm, tpm, conc, expires, models *string
}

func newKeyLimitFlags(fs *flag.FlagSet) *keyLimitFlags {
	f := &keyLimitFlags{
		daily:   amountFlag(fs, "daily-limit", "spend limit per UTC day, in the customer's currency", false),
		monthly: amountFlag(fs, "monthly-limit", "spend limit per UTC month, in the customer's currency", false),
		rpm:     fs.String("rpm-limit", "", "at most `N` requests per minute, across every gateway"),
		tpm:     fs.String("tpm-limit", "", "at most `N` tokens per minute (prompt + completion, as reported by the provider)"),
		conc:    fs.String("max-concurrent", "", "at most `N` requests open at once"),
		expires: fs.String("expires-at", "", "when the key stops working: RFC 3339 or a date (UTC midnight)"),
		models:  new(string),
	}
	fs.Var(checkedValue{dst: f.models, check: checkModels}, "allowed-models", "comma-separated `LIST` of model names or provider/* the key may use (default: every model)")
	return f
}

// count parses a positive count flag.
func count(name, s string) (*int64, error) {
	if s == "" {
		return nil, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return nil, usagef("--%s: %q is not a positive whole number", name, s)
	}
	return &n, nil
}

// models splits a comma-separated list of models.
func models(s string) []string {
	var out []string
	for m := range strings.SplitSeq(s, ",") {
		if m = strings.TrimSpace(m); m != "" {
			out = append(out, m)
		}
	}
	return out
}

// input is the limits as a new key's.
func (f *keyLimitFlags) input(name string) (ledger.KeyInput, error) {
	in := ledger.KeyInput{Name: name, DailyLimit: optional(*f.daily), MonthlyLimit: optional(*f.monthly),
		AllowedModels: models(*f.models)}
	var err error
	if in.RPMLimit, err = count("rpm-limit", *f.rpm); err != nil {
		return in, err
	}
	if in.TPMLimit, err = count("tpm-limit", *f.tpm); err != nil {
		return in, err
	}
	if in.MaxConcurrent, err = count("max-concurrent", *f.conc); err != nil {
		return in, err
	}
	in.ExpiresAt, err = optionalWhen("expires-at", *f.expires)
	return in, err
}

// keyCommands are `tollgate keys ...`: a customer's API keys.
func keyCommands() []*command {
	limitArgs := "[--daily-limit AMOUNT] [--monthly-limit AMOUNT] [--rpm-limit N] [--tpm-limit N] [--max-concurrent N] " +
		"[--expires-at TIME] [--allowed-models LIST]"
	return []*command{{
		name: "keys create", args: "--customer CUSTOMER_ID --name NAME " + limitArgs + " [--idempotency-key KEY]",
		summary: "create an API key, working on every gateway when this returns; its secret is shown this once (POST /admin/v1/customers/{id}/keys)",
		example: "tollgate keys create --customer 0197a3c2-… --name production --daily-limit 5 --rpm-limit 600 " +
			"--allowed-models 'gpt-4o-mini,anthropic/*'",
		flags: func(fs *flag.FlagSet) func(*cli, []string) error {
			customer := idFlag(fs, "customer", "customer id (required)")
			name := fs.String("name", "", "key name, for people (required)")
			lf := newKeyLimitFlags(fs)
			key := idempotencyKeyFlag(fs, "makes at most one key: a retry with the same key exits 4 naming the key it made "+
				"(its secret is not shown again: revoke it if it was lost)")
			return func(c *cli, _ []string) error {
				if err := requireFlags("customer", *customer, "name", *name); err != nil {
					return err
				}
				in, err := lf.input(*name)
				if err != nil {
					return err
				}
				in.IdempotencyKey = *key
				out, err := c.api.CreateKey(c.ctx, *customer, in)
				err = c.show(out, err, func() {
					c.showKey(out.Key)
					c.fields("Secret", out.Secret)
				})
				if err == nil {
					c.warn("Store the secret now: it is not shown again (only its prefix is kept).")
				}
				return err
			}
		},
	}, {
		name: "keys update", args: "KEY_ID [--name NAME] " + limitArgs + " [--no-LIMIT…]", nargs: 1, idArgs: true,
		summary: "change an API key's name or limits, on every gateway when this returns (PATCH /admin/v1/keys/{id})",
		example: "tollgate keys update 0197a3c4-… --tpm-limit 100000 --no-daily-limit\n" +
			"  tollgate keys update 0197a3c4-… --expires-at 2027-01-01 --all-models",
		flags: func(fs *flag.FlagSet) func(*cli, []string) error {
			name := fs.String("name", "", "new name")
			lf := newKeyLimitFlags(fs)
			var remove = map[string]*bool{}
			for _, l := range []string{"daily-limit", "monthly-limit", "rpm-limit", "tpm-limit", "max-concurrent", "expires-at"} {
				remove[l] = fs.Bool("no-"+l, false, "remove the "+l)
			}
			allModels := fs.Bool("all-models", false, "allow every model again (clears --allowed-models)")
			return func(c *cli, args []string) error {
				if err := nonEmptyIfGiven(fs, "name", *name); err != nil {
					return err
				}
				p, err := lf.patch(*name, remove, *allModels)
				if err != nil {
					return err
				}
				k, err := c.api.UpdateKey(c.ctx, args[0], p)
				return c.show(k, err, func() { c.showKey(k) })
			}
		},
	}, {
		name: "keys get", args: "KEY_ID", nargs: 1, idArgs: true,
		summary: "show an API key and its limits (GET /admin/v1/keys/{id})",
		example: "tollgate keys get 0197a3c4-…",
		flags: func(fs *flag.FlagSet) func(*cli, []string) error {
			return func(c *cli, args []string) error {
				k, err := c.api.Key(c.ctx, args[0])
				return c.show(k, err, func() { c.showKey(k) })
			}
		},
	}, {
		name: "keys list", args: "--customer CUSTOMER_ID [--limit N | --cursor C]",
		summary: "list a customer's API keys, oldest first, each limit with what the key has spent of it (GET /admin/v1/customers/{id}/keys)",
		example: "tollgate keys list --customer 0197a3c2-…\n  tollgate keys list --customer 0197a3c2-… --limit 20",
		flags: func(fs *flag.FlagSet) func(*cli, []string) error {
			customer := idFlag(fs, "customer", "customer id (required)")
			limit := fs.Int("limit", 0, "only the first N keys (1 to 10000), one page; without it or --cursor, every key, read a page at a time")
			cursor := fs.String("cursor", "", "the page of keys after a previous page: its next_cursor")
			return func(c *cli, _ []string) error {
				if err := requireFlags("customer", *customer); err != nil {
					return err
				}
				if flagGiven(fs, "limit") && (*limit < 1 || *limit > ledger.MaxKeyLimit) {
					return usagef("--limit: %d is not from 1 to %d (a page of keys; leave it out for every key)", *limit, ledger.MaxKeyLimit)
				}
				q := ledger.KeyQuery{Limit: *limit, Cursor: *cursor}
				var page ledger.KeyPage
				var err error
				if flagGiven(fs, "limit") || *cursor != "" {
					page, err = c.api.KeysPage(c.ctx, *customer, q)
				} else {
					page.Data, err = c.api.AllKeys(c.ctx, *customer, q)
				}
				return c.show(page, err, func() {
					rows := make([][]string, len(page.Data))
					for i, k := range page.Data {
						status := "active"
						switch {
						case k.RevokedAt != nil:
							status = "revoked " + ts(k.RevokedAt)
						case k.ExpiresAt != nil:
							status = "expires " + ts(k.ExpiresAt)
						}
						rows[i] = []string{k.ID, dash(k.Name), k.Prefix + "…", spentOf(k.DailyLimit, k.DailySpend, "today"),
							spentOf(k.MonthlyLimit, k.MonthlySpend, "this month"),
							rateLimits(k), ts(&k.CreatedAt), ts(k.LastUsedAt), status}
					}
					c.table([]string{"ID", "NAME", "PREFIX", "DAILY LIMIT", "MONTHLY LIMIT", "RATE LIMITS", "CREATED", "LAST USED", "STATUS"}, rows)
					if page.NextCursor != "" {
						c.warn("More keys follow: add --cursor " + page.NextCursor + ", or leave out --limit and --cursor for every key.")
					}
				})
			}
		},
	}, {
		name: "keys revoke", args: "KEY_ID", nargs: 1, idArgs: true,
		summary: "revoke an API key; every gateway refuses it once this returns (POST /admin/v1/keys/{id}/revoke)",
		example: "tollgate keys revoke 0197a3c4-…",
		flags: func(fs *flag.FlagSet) func(*cli, []string) error {
			return func(c *cli, args []string) error {
				k, err := c.api.RevokeKey(c.ctx, args[0])
				return c.show(k, err, func() {
					c.fields("ID", k.ID, "Customer", k.CustomerID, "Name", dash(k.Name), "Revoked", ts(k.RevokedAt))
				})
			}
		},
	}}
}

// patch is the flags as a key patch: each flag given sets its field, each
// --no-LIMIT removes one.
func (f *keyLimitFlags) patch(name string, remove map[string]*bool, allModels bool) (ledger.KeyPatch, error) {
	var p ledger.KeyPatch
	if name != "" {
		p.Name = ledger.Of(name)
	}
	set := 0
	str := func(flagName, v string, dst *ledger.Optional[string]) error {
		if v != "" && *remove[flagName] {
			return usagef("give --%s or --no-%s, not both", flagName, flagName)
		}
		if v != "" || *remove[flagName] {
			*dst = ledger.Optional[string]{Set: true, Value: optional(v)}
			set++
		}
		return nil
	}
	num := func(flagName, v string, dst *ledger.Optional[int64]) error {
		if v != "" && *remove[flagName] {
			return usagef("give --%s or --no-%s, not both", flagName, flagName)
		}
		n, err := count(flagName, v)
		if err != nil {
			return err
		}
		if n != nil || *remove[flagName] {
			*dst = ledger.Optional[int64]{Set: true, Value: n}
			set++
		}
		return nil
	}
	for _, err := range []error{
		str("daily-limit", *f.daily, &p.DailyLimit), str("monthly-limit", *f.monthly, &p.MonthlyLimit),
		num("rpm-limit", *f.rpm, &p.RPMLimit), num("tpm-limit", *f.tpm, &p.TPMLimit),
		num("max-concurrent", *f.conc, &p.MaxConcurrent),
	} {
		if err != nil {
			return p, err
		}
	}
	switch {
	case *f.expires != "" && *remove["expires-at"]:
		return p, usagef("give --expires-at or --no-expires-at, not both")
	case *f.expires != "":
		t, err := optionalWhen("expires-at", *f.expires)
		if err != nil {
			return p, err
		}
		p.ExpiresAt = ledger.Optional[time.Time]{Set: true, Value: t}
		set++
	case *remove["expires-at"]:
		p.ExpiresAt = ledger.Optional[time.Time]{Set: true}
		set++
	}
	switch {
	case *f.models != "" && allModels:
		return p, usagef("give --allowed-models or --all-models, not both")
	case *f.models != "":
		p.AllowedModels = ledger.Of(models(*f.models))
		set++
	case allModels:
		p.AllowedModels = ledger.Optional[[]string]{Set: true}
		set++
	}
	if name == "" && set == 0 {
		return p, usagef("nothing to change: give --name, a limit, or --no-LIMIT")
	}
	return p, nil
}

// showKey shows a key and its limits.
func (c *cli) showKey(k ledger.Key) {
	allowed := "every model"
	if len(k.AllowedModels) > 0 {
		allowed = strings.Join(k.AllowedModels, ", ")
	}
	c.fields("ID", k.ID, "Customer", k.CustomerID, "Name", dash(k.Name), "Prefix", k.Prefix+"…",
		"Daily limit", spentOf(k.DailyLimit, k.DailySpend, "today"), "Monthly limit", spentOf(k.MonthlyLimit, k.MonthlySpend, "this month"), "Rate limits", rateLimits(k),
		"Allowed models", allowed, "Expires", ts(k.ExpiresAt), "Revoked", ts(k.RevokedAt))
}

// spentOf shows a spend limit and, when the API gave it (a read of the
// key, not a change), what the key has spent of it in the period named
// by when: "5 (0.0125 spent today)"; "-" for no limit.
func spentOf(limit, spent *string, when string) string {
	if limit == nil || spent == nil {
		return opt(limit)
	}
	return *limit + " (" + *spent + " spent " + when + ")"
}

// rateLimits shows a key's rpm, tpm and concurrency limits, "-" for none.
func rateLimits(k ledger.Key) string {
	var parts []string
	for _, l := range []struct {
		v    *int64
		unit string
	}{{k.RPMLimit, "rpm"}, {k.TPMLimit, "tpm"}, {k.MaxConcurrent, "open"}} {
		if l.v != nil {
			parts = append(parts, strconv.FormatInt(*l.v, 10)+" "+l.unit)
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}
