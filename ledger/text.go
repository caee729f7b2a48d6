package ledger

import "github.com/tollgate-dev/tollgate/meter/usage"

// The longest texts an operator may give, in bytes: names are shown on
// lists and statements, memos on the customer's statement.
const (
	MaxNameLen = 256  // a customer's or a key's name
	MaxMemoLen = 1024 // an entry's memo
)

// checkText returns an EInvalid error naming field when s is longer than
// max bytes, holds a NUL byte or is not valid UTF-8: Postgres refuses the
// last two with an error that names neither the field nor the cause.
func checkText(field, s string, max int) error {
	if err := usage.CheckString(s, max); err != nil {
		return errorf(EInvalid, "%s: %v", field, err)
	}
	return nil
}
