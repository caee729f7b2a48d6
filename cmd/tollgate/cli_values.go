package main

import (
	"flag"
	"strings"

	"github.com/google/uuid"

	"github.com/tollgate-dev/tollgate/ledger"
)

// amountValue is a flag holding a decimal amount of money, checked as the
// server checks it (ledger.ParseMicros, or ParseSignedMicros when signed):
// a bad one is a usage error (exit 2), found before anything is sent.
type amountValue struct {
	dst    *string
	name   string
	signed bool
}

func (a amountValue) String() string {
	if a.dst == nil {
		return ""
	}
	return *a.dst
}

func (a amountValue) Set(s string) error {
	parse := ledger.ParseMicros
	if a.signed {
		parse = ledger.ParseSignedMicros
	}
	if _, err := parse(a.name, s); err != nil {
		return err
	}
	*a.dst = s
	return nil
}

// amountVar registers an amount flag (see amountValue) storing into p.
func amountVar(fs *flag.FlagSet, p *string, name, usage string, signed bool) {
	fs.Var(amountValue{dst: p, name: name, signed: signed}, name, usage+", a decimal `AMOUNT`")
}

// amountFlag is amountVar with a new string.
func amountFlag(fs *flag.FlagSet, name, usage string, signed bool) *string {
	p := new(string)
	amountVar(fs, p, name, usage, signed)
	return p
}

// checkedValue is a string flag whose value check refuses, as a usage
// error, before the command sends anything.
type checkedValue struct {
	dst   *string
	check func(string) error
}

func (v checkedValue) String() string {
	if v.dst == nil {
		return ""
	}
	return *v.dst
}

func (v checkedValue) Set(s string) error {
	if err := v.check(s); err != nil {
		return err
	}
	*v.dst = s
	return nil
}

// checkID returns a usage error when s is not an id as the admin API takes
// one: a UUID in its 36-character form.
func checkID(s string) error {
	if _, err := uuid.Parse(s); err != nil || len(s) != 36 {
		return usagef("%q is not an id (a UUID such as 0197a3c2-aaaa-7bbb-8ccc-ddddeeeeffff)", s)
	}
	return nil
}

// idFlag registers a UUID flag (see checkID).
func idFlag(fs *flag.FlagSet, name, usage string) *string {
	p := new(string)
	fs.Var(checkedValue{dst: p, check: checkID}, name, usage+", a `UUID`")
	return p
}

// checkIdempotencyKey refuses a blank --idempotency-key, which a
// script's unset variable gives and which would be sent as no key at all
// (each retry making another customer, key or entry).
func checkIdempotencyKey(s string) error {
	if strings.TrimSpace(s) == "" {
		return usagef("%q is blank; give a key (an unset variable?), or leave the flag out for none", s)
	}
	return nil
}

// idempotencyKeyFlag registers --idempotency-key (see checkIdempotencyKey).
func idempotencyKeyFlag(fs *flag.FlagSet, usage string) *string {
	p := new(string)
	fs.Var(checkedValue{dst: p, check: checkIdempotencyKey}, "idempotency-key", "`KEY` (any text, not blank): "+usage)
	return p
}

// checkModels refuses an --allowed-models that names no model ("", " , ":
// a script's unset variable): sent, it allowed every model, the opposite
// of what a restriction meant.
func checkModels(s string) error {
	if len(models(s)) == 0 {
		return usagef("%q names no model; give model names or provider/* (an unset variable?), or leave the flag out "+
			"(keys update --all-models allows every model)", s)
	}
	return nil
}
