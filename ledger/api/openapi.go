package api

import (
	_ "embed"
	"net/http"
)

// openAPIDocument is the OpenAPI 3.0.3 description of the admin API
// (/admin/v1) and the customer API (GET /v1/usage, /v1/balance on the LLM
// listener). cmd/tollgate's OpenAPI tests validate real requests and
// responses against it and check that it covers every admin route.
//
//go:embed openapi.json
var openAPIDocument []byte

// OpenAPI returns the OpenAPI document (JSON). The caller must not modify it.
func OpenAPI() []byte { return openAPIDocument }

// openAPI serves the OpenAPI document; it needs no admin token.
func (a *Admin) openAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(openAPIDocument)
}
