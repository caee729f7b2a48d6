package api_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestABodyOfExactly1MiBIsRead: the body limit is 1 MiB inclusive: a
// body of exactly 1,048,576 bytes is read (a customer created), one byte
// more is refused (TestBodyErrorsSayWhatTheFieldMustBe). (Mutation audit
// survivor: a body of exactly the limit refused as larger than it.)
func TestABodyOfExactly1MiBIsRead(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	body := `{"name":"big"}`
	body += strings.Repeat(" ", 1<<20-len(body))
	s.adm("POST", "/admin/v1/customers", body, http.StatusCreated, nil)
	s.adm("POST", "/admin/v1/customers", body+" ", http.StatusBadRequest, nil)
}
