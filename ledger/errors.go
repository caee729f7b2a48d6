package ledger

import (
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Error codes carried by *Error. The admin API maps each to one HTTP
// status, in one table (ledger/api) that its client reads back.
const (
	ENotFound     = "not_found"    // the thing asked for does not exist
	EConflict     = "conflict"     // it exists already, or clashes with what exists
	EInvalid      = "invalid"      // the input is malformed or out of range
	EUnauthorized = "unauthorized" // the caller's credentials are missing or wrong
	EUnavailable  = "unavailable"  // something the operation needs is not reachable from here
	EInternal     = "internal"     // anything else: the details are in the server's log
	// ERateLimited: too many requests of the caller's; retry after a wait.
	ERateLimited = "rate_limit_exceeded"
)

// Error is a ledger error with a code a caller can act on and a message
// safe to show to an API user.
type Error struct {
	Code    string
	Message string
}

// Error returns the message, safe to show to an API user.
func (e *Error) Error() string { return e.Message }

// ErrorCode returns the code of the first *Error in err's chain, or "" when
// there is none (an internal error).
func ErrorCode(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

func errorf(code, format string, args ...any) error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// dbError translates database errors into ledger errors in one place: no rows
// becomes ENotFound, a unique violation EConflict, a check or foreign-key
// violation or malformed value EInvalid. what names the thing for the message.
func dbError(err error, what string) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return errorf(ENotFound, "%s not found", what)
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		switch pg.Code {
		case "23505":
			return errorf(EConflict, "%s already exists", what)
		case "23503", "23514", "22P02", "22007", "22008",
			"22021", // character_not_in_repertoire: a NUL byte in text
			"22P05", // untranslatable_character
			"22003": // numeric_value_out_of_range
			return errorf(EInvalid, "%s is invalid: %s", what, pg.Message)
		}
	}
	return fmt.Errorf("%s: %w", what, err)
}

// checkTime refuses t, the value of an input's field, when it falls, in
// UTC, outside the years 0001 to 9998, as the API's query times are
// refused: Postgres has no year 0, and a time in 9999 or later is stored
// but cannot be written as JSON (encoding/json's time.Time stops at 9999),
// so it would break every answer and every key sync it is in, and a
// credit dated there would count in the balance and be listed by no entry
// list, statement or export. A nil or zero t is not checked. It returns an
// EInvalid *Error naming the field.
//
// A time that passes is truncated to the microsecond, as Postgres stores
// it: a version starting 100 ns after another was compared with it to the
// nanosecond and then stored at the same microsecond, and an idempotent
// request's nanoseconds never matched what its first request stored.
func checkTime(field string, t *time.Time) error {
	if t == nil || t.IsZero() {
		return nil
	}
	*t = t.Truncate(time.Microsecond)
	if y := t.UTC().Year(); y < 1 || y > 9998 {
		return errorf(EInvalid, "%s: %s is outside the years 0001 to 9998 (UTC)", field, t.Format(time.RFC3339))
	}
	return nil
}
