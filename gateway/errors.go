package gateway

import (
	"encoding/json"
	"net/http"
)

// apiError is the OpenAI error envelope:
// {"error":{"message":..., "type":..., "code":...}}.
type apiError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// writeError sends an OpenAI-shaped error with the given status.
func writeError(w http.ResponseWriter, status int, typ, code, msg string) {
	e := apiError{Message: msg, Type: typ}
	if code != "" {
		e.Code = &code
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]apiError{"error": e})
}

func errInvalidRequest(w http.ResponseWriter, msg string) {
	writeError(w, http.StatusBadRequest, "invalid_request_error", "invalid_request", msg)
}
