package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/tollgate-dev/tollgate/ledger"
)

// errorStatuses is the one table between the ledger's error codes and the
// admin API's HTTP statuses, read both ways: the server answers a code
// with the status of the code's first row, and the client reads any
// status of a row back as the row's code. The last two rows are statuses
// this API never sends, from whatever may stand in front of it (a proxy
// refusing a request).
var errorStatuses = [...]struct {
	code   string
	status int
}{
	{ledger.EInvalid, http.StatusBadRequest},
	{ledger.EUnauthorized, http.StatusUnauthorized},
	{ledger.ENotFound, http.StatusNotFound},
	{ledger.EConflict, http.StatusConflict},
	{ledger.EInternal, http.StatusInternalServerError},
	{ledger.EUnavailable, http.StatusServiceUnavailable},
	{ledger.ERateLimited, http.StatusTooManyRequests},
	{ledger.EUnauthorized, http.StatusForbidden},
	{ledger.EInvalid, http.StatusUnprocessableEntity},
}

// errorStatus is the status the server answers code with, 0 for a code
// the table does not have.
func errorStatus(code string) int {
	for _, row := range errorStatuses {
		if row.code == code {
			return row.status
		}
	}
	return 0
}

// errorCode is the code of an error answer with status: EInternal for a
// status the table does not have.
func errorCode(status int) string {
	for _, row := range errorStatuses {
		if row.status == status {
			return row.code
		}
	}
	return ledger.EInternal
}

// writeError answers an error with code's status and the admin API's
// envelope: {"error": {"message", "type", "code"}}, type the same as code.
func writeError(w http.ResponseWriter, code, msg string) {
	status := errorStatus(code)
	if status == 0 {
		status, code = http.StatusInternalServerError, ledger.EInternal
	}
	writeEnvelope(w, status, code, msg)
}

// writeEnvelope writes an error envelope with any status and code: the
// customer API's own codes (invalid_api_key) are not ledger codes.
func writeEnvelope(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]string{"message": msg, "type": code, "code": code}})
}

// answerError turns an error answer back into the ledger error the server
// answered: its envelope's code and message. An answer without the
// envelope (from a proxy, say) gets the code of its status and a short
// rendering of its body.
func answerError(status int, body []byte) *ledger.Error {
	var e struct {
		Error struct {
			Message string `json:"message"`
			Code    string `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
		code := e.Error.Code
		if errorStatus(code) == 0 {
			code = errorCode(status)
		}
		return &ledger.Error{Code: code, Message: e.Error.Message}
	}
	msg := strings.TrimSpace(string(body))
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	return &ledger.Error{Code: errorCode(status), Message: fmt.Sprintf("%s (HTTP %d)", msg, status)}
}

// UnreachableError is a request that got no HTTP answer: connection
// refused, DNS or TLS failure, timeout.
type UnreachableError struct {
	// URL is the admin API's base URL.
	URL string
	Err error
}

// Error names the admin API's URL and the root cause of the failure.
func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach the admin API at %s: %v", e.URL, rootCause(e.Err))
}

// Unwrap returns the transport error.
func (e *UnreachableError) Unwrap() error { return e.Err }

// NoAnswerError is a change (a request of a method other than GET or
// HEAD) that the client sent whole and got no answer to: the connection
// ended first (the admin process killed, or its host lost). The change
// may have been made, so it is not an *UnreachableError, which says
// nothing was sent: the operator looks before sending it again.
type NoAnswerError struct {
	// URL is the admin API's base URL; Method and Path are the request's.
	URL, Method, Path string
	Err               error
}

// Error names the request, says that it may have been done, and which
// requests are safe to send again.
func (e *NoAnswerError) Error() string {
	return fmt.Sprintf("%s %s: sent to the admin API at %s, which closed the connection with no answer (%v): "+
		"it may have been done; look before sending it again (a credit, an adjustment, a customer or a key with the same "+
		"idempotency key (a key's answers 409 naming the key made), a refund, a reversal, a re-rating or a dead-letter replay "+
		"is safe to send again)",
		e.Method, e.Path, e.URL, rootCause(e.Err))
}

// Unwrap returns the transport error.
func (e *NoAnswerError) Unwrap() error { return e.Err }

// rootCause is the innermost error of a chain, for short messages
// ("connection refused" rather than the whole dial chain).
func rootCause(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}
