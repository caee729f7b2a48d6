package main

import (
	"flag"

	"github.com/tollgate-dev/tollgate/ledger"
)

// customerCommands are `tollgate customers ...`: POST, GET and PATCH
// /admin/v1/customers[/{id}], and the balance.
func customerCommands() []*command {
	return []*command{{
		name: "customers create", args: "--name NAME [--currency USD] [--credit-limit AMOUNT]",
		summary: "create a customer (POST /admin/v1/customers)",
		example: "tollgate customers create --name acme --currency USD --credit-limit 10.00",
		flags: func(fs *flag.FlagSet) func(*cli, []string) error {
			name := fs.String("name", "", "customer name (required)")
			currency := fs.String("currency", "", "ISO 4217 currency of its prices and balance (default USD)")
			limit := fs.String("credit-limit", "", "how far below zero its balance may go, as a decimal (default: no limit)")
			return func(c *cli, _ []string) error {
				if err := requireFlags("name", *name); err != nil {
					return err
				}
				in := ledger.CustomerInput{Name: *name, Currency: *currency, CreditLimit: optional(*limit)}
				var out ledger.Customer
				return c.call("POST", "/admin/v1/customers", in, &out, func() { c.showCustomer(out) })
			}
		},
	}, {
		name: "customers list", args: "[--name NAME]",
		summary: "list customers, oldest first (GET /admin/v1/customers)",
		example: "tollgate customers list\n  tollgate customers list --name acme --json",
		flags: func(fs *flag.FlagSet) func(*cli, []string) error {
			name := fs.String("name", "", "only customers with exactly this name")
			return func(c *cli, _ []string) error {
				var out struct{ Data []ledger.Customer }
				return c.call("GET", "/admin/v1/customers"+query("name", *name), nil, &out, func() {
					rows := make([][]string, len(out.Data))
					for i, cu := range out.Data {
						rows[i] = []string{cu.ID, cu.Name, cu.Currency, opt(cu.CreditLimit), ts(&cu.CreatedAt)}
					}
					c.table([]string{"ID", "NAME", "CURRENCY", "CREDIT LIMIT", "CREATED"}, rows)
				})
			}
		},
	}, {
		name: "customers get", args: "CUSTOMER_ID", nargs: 1,
		summary: "show a customer (GET /admin/v1/customers/{id})",
		example: "tollgate customers get 0197a3c2-…",
		flags: func(fs *flag.FlagSet) func(*cli, []string) error {
			return func(c *cli, args []string) error {
				var out ledger.Customer
				return c.call("GET", "/admin/v1/customers/"+seg(args[0]), nil, &out, func() { c.showCustomer(out) })
			}
		},
	}, {
		name: "customers update", args: "CUSTOMER_ID [--name NAME] [--credit-limit AMOUNT | --no-credit-limit]", nargs: 1,
		summary: "rename a customer or change its credit limit (PATCH /admin/v1/customers/{id})",
		example: "tollgate customers update 0197a3c2-… --credit-limit 50\n  tollgate customers update 0197a3c2-… --no-credit-limit",
		flags: func(fs *flag.FlagSet) func(*cli, []string) error {
			name := fs.String("name", "", "new name")
			limit := fs.String("credit-limit", "", "new credit limit, as a decimal")
			noLimit := fs.Bool("no-credit-limit", false, "remove the credit limit")
			return func(c *cli, args []string) error {
				patch := map[string]any{}
				if *name != "" {
					patch["name"] = *name
				}
				switch {
				case *limit != "" && *noLimit:
					return usagef("give --credit-limit or --no-credit-limit, not both")
				case *limit != "":
					patch["credit_limit"] = *limit
				case *noLimit:
					patch["credit_limit"] = nil
				}
				if len(patch) == 0 {
					return usagef("nothing to change: give --name, --credit-limit or --no-credit-limit")
				}
				var out ledger.Customer
				return c.call("PATCH", "/admin/v1/customers/"+seg(args[0]), patch, &out, func() { c.showCustomer(out) })
			}
		},
	}, {
		name: "customers balance", args: "CUSTOMER_ID", nargs: 1,
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
			customer := fs.String("customer", "", "customer id (required)")
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
	var b ledger.Balance
	return c.call("GET", "/admin/v1/customers/"+seg(customerID)+"/balance", nil, &b, func() {
		c.fields("Customer", b.CustomerID, "Balance", b.Balance+" "+b.Currency, "Credits", b.Credits,
			"Charges", b.Charges, "Credit limit", opt(b.CreditLimit), "Available", opt(b.Available))
	})
}

// keyCommands are `tollgate keys ...`: a customer's API keys.
func keyCommands() []*command {
	return []*command{{
		name: "keys create", args: "--customer CUSTOMER_ID [--name NAME] [--daily-limit AMOUNT] [--monthly-limit AMOUNT]",
		summary: "create an API key; its secret is shown this once (POST /admin/v1/customers/{id}/keys)",
		example: "tollgate keys create --customer 0197a3c2-… --name production --daily-limit 5",
		flags: func(fs *flag.FlagSet) func(*cli, []string) error {
			customer := fs.String("customer", "", "customer id (required)")
			name := fs.String("name", "", "key name, for people")
			daily := fs.String("daily-limit", "", "spend limit per UTC day, in the customer's currency")
			monthly := fs.String("monthly-limit", "", "spend limit per UTC month, in the customer's currency")
			return func(c *cli, _ []string) error {
				if err := requireFlags("customer", *customer); err != nil {
					return err
				}
				in := ledger.KeyInput{Name: *name, DailyLimit: optional(*daily), MonthlyLimit: optional(*monthly)}
				var out struct {
					ledger.Key
					Secret string `json:"key"`
				}
				err := c.call("POST", "/admin/v1/customers/"+seg(*customer)+"/keys", in, &out, func() {
					c.fields("ID", out.ID, "Customer", out.CustomerID, "Name", dash(out.Name),
						"Daily limit", opt(out.DailyLimit), "Monthly limit", opt(out.MonthlyLimit), "Secret", out.Secret)
				})
				if err == nil {
					c.warn("Store the secret now: it is not shown again (only its prefix is kept).")
				}
				return err
			}
		},
	}, {
		name: "keys list", args: "--customer CUSTOMER_ID",
		summary: "list a customer's API keys (GET /admin/v1/customers/{id}/keys)",
		example: "tollgate keys list --customer 0197a3c2-…",
		flags: func(fs *flag.FlagSet) func(*cli, []string) error {
			customer := fs.String("customer", "", "customer id (required)")
			return func(c *cli, _ []string) error {
				if err := requireFlags("customer", *customer); err != nil {
					return err
				}
				var out struct{ Data []ledger.Key }
				return c.call("GET", "/admin/v1/customers/"+seg(*customer)+"/keys", nil, &out, func() {
					rows := make([][]string, len(out.Data))
					for i, k := range out.Data {
						status := "active"
						if k.RevokedAt != nil {
							status = "revoked " + ts(k.RevokedAt)
						}
						rows[i] = []string{k.ID, dash(k.Name), k.Prefix + "…", opt(k.DailyLimit), opt(k.MonthlyLimit),
							ts(&k.CreatedAt), ts(k.LastUsedAt), status}
					}
					c.table([]string{"ID", "NAME", "PREFIX", "DAILY LIMIT", "MONTHLY LIMIT", "CREATED", "LAST USED", "STATUS"}, rows)
				})
			}
		},
	}, {
		name: "keys revoke", args: "KEY_ID", nargs: 1,
		summary: "revoke an API key; the gateway refuses it within seconds (POST /admin/v1/keys/{id}/revoke)",
		example: "tollgate keys revoke 0197a3c4-…",
		flags: func(fs *flag.FlagSet) func(*cli, []string) error {
			return func(c *cli, args []string) error {
				var k ledger.Key
				return c.call("POST", "/admin/v1/keys/"+seg(args[0])+"/revoke", nil, &k, func() {
					c.fields("ID", k.ID, "Customer", k.CustomerID, "Name", dash(k.Name), "Revoked", ts(k.RevokedAt))
				})
			}
		},
	}}
}

// warn prints a notice for people on stderr, so stdout stays the answer.
func (c *cli) warn(msg string) {
	c.stderr.Write([]byte(msg + "\n"))
}
