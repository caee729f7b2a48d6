package gateway

import "testing"

// TestAPIType: the Content-Types whose answers webPage does not look at.
func TestAPIType(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/json": true, "Application/JSON; charset=utf-8": true, "text/event-stream": true,
		"text/event-stream;charset=UTF-8": true, "application/problem+json": true,
		"": false, "text/html": false, "text/plain": false, "application/xml": false, "+json": false, "text/x+json": false,
	} {
		if got := apiType(ct); got != want {
			t.Errorf("apiType(%q) = %v, want %v", ct, got, want)
		}
	}
}
