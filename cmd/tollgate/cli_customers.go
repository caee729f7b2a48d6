package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/tollgate-dev/tollgate/ledger"
)

// customerCommands are `tollgate customers ...`: POST, GET and PATCH
// /admin/v1/customers[/{id}], and the balance.
func customerCommands() []*command {
	return []*command{{
		name: "customers create", args: "--name NAME [--currency USD] [--credit-limit AMOUNT] [--idempotency-key KEY]",
		summary: "create a customer (POST /admin/v1/customers)",
		example: "tollgate customers create --name acme --currency USD --credit-limit 10.00 --idempotency-key onboard-acme",
		flags: func(fs *flag.FlagSet) func(*cli, []string) error {
			name := fs.String("name", "", "customer name (required)")
			currency := fs.String("currency", "", "ISO 4217 currency of its prices and balance (default USD)")
			limit := amountFlag(fs, "credit-limit", "how far below zero its balance may go, as a decimal (default: no limit)", false)
			key := idempotencyKeyFlag(fs, "a retry with the same key shows the customer it made instead of making another")
			return func(c *cli, _ []string) error {
				if err := requireFlags("name", *name); err != nil {
					return err
				}
				in := ledger.CustomerInput{Name: *name, Currency: *currency, CreditLimit: optional(*limit), IdempotencyKey: *key}
				cu, err := c.api.CreateCustomer(c.ctx, in)
				if err == nil {
					c.noteSameName(cu, *key)
				}
				return c.show(cu, err, func() { c.showCustomer(cu) })
			}
		},
	}, {
		name: "customers list", args: "[--name NAME] [--search TEXT] [--limit N | --cursor C]",
		summary: "list customers, oldest first (GET /admin/v1/customers)",
		example: "tollgate customers list\n  tollgate customers list --name acme --json\n  tollgate customers list --search acme --limit 20",
		flags: func(fs *flag.FlagSet) func(*cli, []string) error {
			name := fs.String("name", "", "only customers with exactly this name")
			search := fs.String("search", "", "only customers whose name contains this text (in any case) or whose id it is")
			limit := fs.Int("limit", 0, "only the first N customers (1 to 10000), one page; without it or --cursor, every customer, read a page at a time")
			cursor := fs.String("cursor", "", "the page of customers after a previous page: its next_cursor")
			return func(c *cli, _ []string) error {
				if flagGiven(fs, "limit") && (*limit < 1 || *limit > ledger.MaxCustomerLimit) {
					return usagef("--limit: %d is not from 1 to %d (a page of customers; leave it out for every customer)", *limit, ledger.MaxCustomerLimit)
				}
				q := ledger.CustomerQuery{Name: *name, Search: *search, Limit: *limit, Cursor: *cursor}
				var page ledger.CustomerPage
				var err error
				if flagGiven(fs, "limit") || *cursor != "" {
					page, err = c.api.CustomersPage(c.ctx, q)
				} else {
					page.Data, err = c.api.AllCustomers(c.ctx, q)
				}
				return c.show(page, err, func() {
					rows := make([][]string, len(page.Data))
					for i, cu := range page.Data {
						rows[i] = []string{cu.ID, cu.Name, cu.Currency, opt(cu.CreditLimit), ts(&cu.CreatedAt)}
					}
					c.table([]string{"ID", "NAME", "CURRENCY", "CREDIT LIMIT", "CREATED"}, rows)
					if page.NextCursor != "" {
						c.warn("More customers follow: add --cursor " + page.NextCursor + ", or leave out --limit and --cursor for every customer.")
					}
				})
			}
		},
	}, {
		name: "customers get", args: "CUSTOMER_ID", nargs: 1, idArgs: true,
		summary: "show a customer (GET /admin/v1/customers/{id})",
		example: "tollgate customers get 0197a3c2-…",
		flags: func(fs *flag.FlagSet) func(*cli, []string) error {
			return func(c *cli, args []string) error {
				cu, err := c.api.Customer(c.ctx, args[0])
				return c.show(cu, err, func() { c.showCustomer(cu) })
			}
		},
	}, {
		name: "customers update", args: "CUSTOMER_ID [--name NAME] [--credit-limit AMOUNT | --no-credit-limit]", nargs: 1, idArgs: true,
		summary: "rename a customer or change its credit limit (PATCH /admin/v1/customers/{id})",
		example: "tollgate customers update 0197a3c2-… --credit-limit 50\n  tollgate customers update 0197a3c2-… --no-credit-limit",
		flags: func(fs *flag.FlagSet) func(*cli, []string) error {
			name := fs.String("name", "", "new name")
			limit := amountFlag(fs, "credit-limit", "new credit limit, as a decimal", false)
			noLimit := fs.Bool("no-credit-limit", false, "remove the credit limit")
			return func(c *cli, args []string) error {
				if err := nonEmptyIfGiven(fs, "name", *name); err != nil {
					return err
				}
				var patch ledger.CustomerPatch
				if *name != "" {
					patch.Name = name
				}
				switch {
				case *limit != "" && *noLimit:
					return usagef("give --credit-limit or --no-credit-limit, not both")
				case *limit != "":
					patch.SetCreditLimit, patch.CreditLimit = true, limit
				case *noLimit:
					patch.SetCreditLimit = true
				}
				if patch.Name == nil && !patch.SetCreditLimit {
					return usagef("nothing to change: give --name, --credit-limit or --no-credit-limit")
				}
				cu, err := c.api.UpdateCustomer(c.ctx, args[0], patch)
				return c.show(cu, err, func() { c.showCustomer(cu) })
			}
		},
	}, {
		name: "customers balance", args: "CUSTOMER_ID", nargs: 1, idArgs: true,
		summary: "show a customer's balance (GET /admin/v1/customers/{id}/balance)",
		example: "tollgate customers balance 0197a3c2-…",
		flags: func(fs *flag.FlagSet) func(*cli, []string) error {
			return func(c *cli, args []string) error { return c.balance(args[0]) }
		},
	}, {
		name: "balance", args: "--customer CUSTOMER_ID",
		summary: "show a customer's balance (GET /admin/v1/customers/{id}/balance)",
		example: "tollgate balance --customer 0197a3c2-…",
		flags: func(fs *flag.FlagSet) func(*cli, []string) error {
			customer := idFlag(fs, "customer", "customer id (required)")
			return func(c *cli, _ []string) error {
				if err := requireFlags("customer", *customer); err != nil {
					return err
				}
				return c.balance(*customer)
			}
		},
	}}
}

func (c *cli) showCustomer(cu ledger.Customer) {
	c.fields("ID", cu.ID, "Name", cu.Name, "Currency", cu.Currency, "Credit limit", opt(cu.CreditLimit),
		"Created", ts(&cu.CreatedAt), "Updated", ts(&cu.UpdatedAt))
}

func (c *cli) balance(customerID string) error {
	b, err := c.api.Balance(c.ctx, customerID)
	return c.show(b, err, func() {
		c.fields("Customer", b.CustomerID, "Balance", b.Balance+" "+b.Currency, "Credits", b.Credits,
			"Charges", b.Charges, "Credit limit", opt(b.CreditLimit), "Available", opt(b.Available))
	})
}

// warn prints a notice for people on stderr, so stdout stays the answer.
// noteSameName warns, on stderr, when customers other than cu already
// bear its name: names need not be unique, and a create without an
// idempotency key run twice (a script's retry, the README's block run
// again) makes a second customer. With one (key), cu may be what an
// earlier run made, and the note says only that others share the name.
// It names the oldest few; a failed look-up says nothing.
func (c *cli) noteSameName(cu ledger.Customer, key string) {
	page, err := c.api.CustomersPage(c.ctx, ledger.CustomerQuery{Name: cu.Name, Limit: 4})
	if err != nil {
		return
	}
	var others []string
	for _, o := range page.Data {
		if o.ID != cu.ID {
			others = append(others, o.ID)
		}
	}
	if len(others) == 0 {
		return
	}
	who := "another customer is"
	if len(others) > 1 || page.NextCursor != "" {
		who = "other customers are"
	}
	if len(others) > 3 || page.NextCursor != "" {
		others = append(others[:min(len(others), 3)], "…")
	}
	if key != "" {
		// The answer may be a retry's: the customer an earlier run made
		// with this key, which it must not call new, or a mistake.
		c.warn(fmt.Sprintf("note: %s also named %q (%s); names need not be unique: this one is idempotency key %q's, "+
			"the same customer on every run with it", who, cu.Name, strings.Join(others, ", "), key))
		return
	}
	c.warn(fmt.Sprintf("note: %s already named %q (%s); this one is new (names need not be unique): "+
		"if it was made by mistake, leave it unused, or rename it with tollgate customers update", who, cu.Name, strings.Join(others, ", ")))
}

func (c *cli) warn(msg string) {
	c.stderr.Write([]byte(msg + "\n"))
}
