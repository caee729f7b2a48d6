package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestCostIsWhatTheLedgerCharges: the cost a caller is shown — usage.cost
// in a non-streamed body and in the usage chunk it asked for, the
// X-Tollgate-Cost header of a non-streamed answer, native routes included
// — is the charge the ledger records for the request, after the
// customer's discount; a stream that did not ask for usage gets none.
func TestCostIsWhatTheLedgerCharges(t *testing.T) {
	s := newStack(t, nil)
	s.adminDo("POST", "/admin/v1/customers/"+s.customerID+"/overrides",
		`{"model":"","discount_percent":"12.5","effective_from":"2020-01-01T00:00:00Z"}`, http.StatusCreated, nil)
	s.refreshKeys()

	// Non-streamed: body and header.
	resp := s.post("/v1/chat/completions", `{"model":"sim-pro","max_tokens":40,"messages":[{"role":"user","content":"cost?"}]}`)
	raw, _ := io.ReadAll(resp.Body)
	var body struct {
		Usage struct {
			Cost json.Number `json:"cost"`
		} `json:"usage"`
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	if err := dec.Decode(&body); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s: %v", resp.StatusCode, raw, err)
	}
	e := s.event(resp.Header.Get("X-Request-Id"))
	if e.Charge == "" || e.Charge == "0" || string(body.Usage.Cost) != e.Charge || resp.Header.Get("X-Tollgate-Cost") != e.Charge ||
		resp.Header.Get("X-Tollgate-Currency") != e.Currency || e.DiscountBP != 1250 {
		t.Fatalf("shown cost %s (header %s %s); the ledger charged %s %s (discount %d bp)", body.Usage.Cost,
			resp.Header.Get("X-Tollgate-Cost"), resp.Header.Get("X-Tollgate-Currency"), e.Charge, e.Currency, e.DiscountBP)
	}

	// Streamed, usage asked for: the usage chunk carries the cost.
	resp = s.post("/v1/chat/completions", chatBody(30, true, ""))
	var usageChunk map[string]json.RawMessage
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || line == "[DONE]" {
			continue
		}
		var chunk map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &chunk); err != nil {
			t.Fatalf("chunk %s: %v", line, err)
		}
		if u := chunk["usage"]; len(u) > 0 && string(u) != "null" {
			usageChunk = chunk
		}
	}
	var u struct {
		Cost json.Number `json:"cost"`
	}
	if usageChunk == nil || json.Unmarshal(usageChunk["usage"], &u) != nil {
		t.Fatal("no usage chunk")
	}
	if e := s.event(resp.Header.Get("X-Request-Id")); string(u.Cost) != e.Charge || e.Charge == "" {
		t.Fatalf("streamed cost %s; the ledger charged %s", u.Cost, e.Charge)
	}

	// Streamed without usage: no usage chunk, so no cost.
	resp = s.post("/v1/chat/completions", chatBody(10, false, ""))
	b, _ := io.ReadAll(resp.Body)
	if strings.Contains(string(b), `"cost"`) || strings.Contains(string(b), `"usage":{`) {
		t.Fatalf("a stream without include_usage got usage: %s", b)
	}

	// A native route, non-streamed: the header.
	req, _ := http.NewRequest("POST", s.gateway+"/anthropic/v1/messages",
		strings.NewReader(`{"model":"claude-sim","max_tokens":20,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("x-api-key", s.secret)
	req.Header.Set("anthropic-version", "2023-06-01")
	nresp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, nresp.Body)
	nresp.Body.Close()
	if e := s.event(nresp.Header.Get("X-Request-Id")); nresp.StatusCode != http.StatusOK || nresp.Header.Get("X-Tollgate-Cost") != e.Charge {
		t.Fatalf("anthropic route: %d, header cost %q; the ledger charged %s", nresp.StatusCode, nresp.Header.Get("X-Tollgate-Cost"), e.Charge)
	}
}
