package api_test

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/api"
)

// TestBodyErrorsSayWhatTheFieldMustBe: a request body with a value of the
// wrong kind is a 400 that names the field and says what it must be, not
// encoding/json's or the time package's words.
func TestBodyErrorsSayWhatTheFieldMustBe(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	cust, key, _ := s.customer(`{"name":"acme"}`)
	keys, c, k := "/admin/v1/customers/"+cust+"/keys", "/admin/v1/customers/"+cust, "/admin/v1/keys/"+key
	const rfc3339 = `must be an RFC 3339 time, like "2027-01-01T00:00:00Z"`
	for _, tc := range []struct{ method, path, body, want string }{
		{"POST", keys, `{"name":"k","expires_at":"2027-01-01"}`, "expires_at: " + rfc3339},
		{"POST", keys, `{"name":"k","expires_at":"2027-13-01T00:00:00Z"}`, "expires_at: " + rfc3339},
		{"POST", keys, `{"name":"k","expires_at":"2020-01-01T00:00:00Z"}`, "expires_at: 2020-01-01T00:00:00Z is not in the future; a new key must be usable"},
		{"POST", keys, `{"name":"k","expires_at":1798761600}`, "expires_at: " + rfc3339},
		{"PATCH", k, `{"expires_at":"tomorrow"}`, "expires_at: " + rfc3339},
		{"POST", keys, `{"name":"k","rpm_limit":"5"}`, "rpm_limit: must be an integer"},
		{"POST", keys, `{"name":"k","rpm_limit":1.5}`, "rpm_limit: must be an integer"},
		{"POST", keys, `{"name":"k","rpm_limit":99999999999999999999}`, "rpm_limit: must be an integer, and 99999999999999999999 is too large"},
		{"PATCH", k, `{"tpm_limit":"5"}`, "tpm_limit: must be an integer"},
		{"POST", keys, `{"name":"k","daily_limit":5}`, `daily_limit: must be a decimal string, like "10.50"`},
		{"POST", keys, `{"name":7}`, "name: must be a string"},
		{"POST", keys, `{"name":"k","allowed_models":"gpt-4o"}`, "allowed_models: must be an array"},
		{"POST", keys, `{"name":"k","allowed_models":["gpt-4o",1]}`, "allowed_models: must be an array of strings"},
		{"POST", keys, `{"name":"k","nmae":"x"}`, "nmae: not a field of this request body"},
		{"POST", keys, `["k"]`, "request body: must be a JSON object"},
		{"POST", keys, `{"name":"k"} {"name":"k2"}`, "request body: must be one JSON object, with nothing after it"},
		{"POST", keys, `{"name":"k"} trailing`, "request body: must be one JSON object, with nothing after it"},
		{"POST", keys, ``, "request body: empty; it must be a JSON object"},
		{"POST", keys, `{"name":"k"`, "request body: not valid JSON: it ends before its object does"},
		{"POST", keys, `not json`, "request body: not valid JSON at byte 2: invalid character 'o' in literal null (expecting 'u')"},
		{"POST", "/admin/v1/customers", `{"name":"b","credit_limit":10}`, `credit_limit: must be a decimal string, like "10.50"`},
		{"PATCH", c, `{"credit_limit":10}`, `credit_limit: must be a decimal string, like "10.50"`},
		{"PATCH", c, `{"name":["x"]}`, "name: must be a string"},
		{"PATCH", c, `{"nmae":"x"}`, "nmae: not a field of this request body"},
		{"POST", c + "/credits", `{"amount":"5","effective_at":"2026-01-01"}`, "effective_at: " + rfc3339},
		{"POST", c + "/credits", `{}`, `amount: is required, a decimal string like "10.50"`},
		{"POST", c + "/overrides", `{"model":"m","price":{"currency":"USD","input":1,"output":"1"},"effective_from":"2026-01-01T00:00:00Z"}`,
			`price.input: must be a decimal string, like "10.50"`},
		{"POST", c + "/overrides", `{"discount_percent":"10","effective_from":"2026-01-01"}`, "effective_from: " + rfc3339},
		// An override's price is for the override's model and period: one
		// of its own was accepted (201) and ignored. (Found by review.)
		{"POST", c + "/overrides", `{"model":"m","price":{"model":"m2","currency":"USD","input":"1","output":"1"},"effective_from":"2026-01-01T00:00:00Z"}`,
			`price.model: "m2" is not the override's model "m": an override's price is for its own model; leave price.model out`},
		{"POST", c + "/overrides", `{"model":"m","price":{"currency":"USD","input":"1","output":"1","effective_from":"2026-03-01T00:00:00Z"},"effective_from":"2026-01-01T00:00:00Z"}`,
			"price.effective_from: an override's price holds over the override's own effective_from and effective_to; leave it out"},
		{"POST", c + "/overrides", `{"model":"m","price":{"currency":"USD","input":"1","output":"1","effective_to":"2026-03-01T00:00:00Z"},"effective_from":"2026-01-01T00:00:00Z"}`,
			"price.effective_to: an override's price holds over the override's own effective_from and effective_to; leave it out"},
		{"POST", "/admin/v1/prices", `{"model":"m","currency":"USD","input":"1","output":"1","effective_from":"2026-01-01T00:00:00Z","effective_to":"2026-02-01"}`,
			"effective_to: " + rfc3339},
		// Over 1 MiB: it was cut, and refused as JSON ending too soon.
		{"POST", keys, `{"name":"` + strings.Repeat("k", 1<<20) + `"}`, "request body: larger than 1048576 bytes (1 MiB)"},
		{"PATCH", c, `{"name":"` + strings.Repeat("k", 1<<20) + `"}`, "request body: larger than 1048576 bytes (1 MiB)"},
	} {
		status, body, err := send(tc.method, s.admin+tc.path, adminToken, tc.body)
		if err != nil {
			t.Fatal(err)
		}
		var e apiError
		if status != http.StatusBadRequest || json.Unmarshal(body, &e) != nil || e.Error.Code != ledger.EInvalid || e.Error.Message != tc.want {
			t.Errorf("%s %s %.200s = %d %.300s, want 400 %q", tc.method, tc.path, tc.body, status, body, tc.want)
		}
	}
}

// TestEveryDecimalFieldRefusesANumber: every field of a request body that
// openapi.json gives a decimal pattern, sent as a JSON number, is refused
// with the decimal message, so that the decoder's list of decimal fields
// keeps up with the spec.
func TestEveryDecimalFieldRefusesANumber(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	cust, key, _ := s.customer(`{"name":"acme"}`)
	var doc struct {
		Paths      map[string]map[string]json.RawMessage
		Components struct{ Schemas map[string]json.RawMessage }
	}
	if err := json.Unmarshal(api.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	type schema struct {
		Ref        string `json:"$ref"`
		Type       string
		Pattern    string
		Properties map[string]json.RawMessage
	}
	resolve := func(raw json.RawMessage) schema {
		var sc schema
		for range 5 {
			if err := json.Unmarshal(raw, &sc); err != nil {
				t.Fatal(err)
			}
			if sc.Ref == "" {
				break
			}
			raw, sc = doc.Components.Schemas[strings.TrimPrefix(sc.Ref, "#/components/schemas/")], schema{}
		}
		return sc
	}
	isDecimal := func(sc schema) bool {
		return sc.Type == "string" && sc.Pattern != "" && regexp.MustCompile(sc.Pattern).MatchString("10.5")
	}
	// decimals returns the dotted paths of the decimal properties of sc,
	// with bodies that set each one to a JSON number.
	var decimals func(sc schema) map[string]string
	decimals = func(sc schema) map[string]string {
		out := map[string]string{}
		for name, raw := range sc.Properties {
			p := resolve(raw)
			if isDecimal(p) {
				out[name] = `{"` + name + `":10}`
			}
			for sub, body := range decimals(p) {
				out[name+"."+sub] = `{"` + name + `":` + body + `}`
			}
		}
		return out
	}
	ids := strings.NewReplacer("{id}", cust)
	tested := 0
	for path, ops := range doc.Paths {
		for method, raw := range ops {
			var op struct {
				RequestBody struct {
					Content map[string]struct{ Schema json.RawMessage }
				} `json:"requestBody"`
			}
			if json.Unmarshal(raw, &op) != nil || op.RequestBody.Content["application/json"].Schema == nil {
				continue
			}
			url := ids.Replace(path)
			if strings.HasPrefix(path, "/admin/v1/keys/") {
				url = strings.ReplaceAll(path, "{id}", key)
			}
			for field, body := range decimals(resolve(op.RequestBody.Content["application/json"].Schema)) {
				tested++
				method := strings.ToUpper(method)
				status, b, err := send(method, s.admin+url, adminToken, body)
				if err != nil {
					t.Fatal(err)
				}
				var e apiError
				want := field + `: must be a decimal string, like "10.50"`
				if status != http.StatusBadRequest || json.Unmarshal(b, &e) != nil || e.Error.Message != want {
					t.Errorf("%s %s %s = %d %s, want 400 %q", method, path, body, status, b, want)
				}
			}
		}
	}
	if tested < 20 {
		t.Errorf("only %d decimal fields found in openapi.json's request bodies", tested)
	}
}

// TestRepeatedKeysAndTheZeroTimeRefused: a key given twice in a body was
// read from its last value ({"amount":"1","amount":"2"} booked a credit of
// 2, where a proxy or a reviewer in front read 1), and the instant
// 0001-01-01T00:00:00Z, Go's zero time, read as a time not given (a credit
// so dated was dated now; a usage query to it read to the end of time)
// (found by the finance review). Both are 400 naming the field (a query's
// from of it is the beginning, as before); bodies with the same keys in
// different objects pass.
func TestRepeatedKeysAndTheZeroTimeRefused(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	cust, _, _ := s.customer(`{"name":"a","currency":"USD"}`)
	for _, c := range []struct{ path, body, field string }{
		{"/customers/" + cust + "/credits", `{"amount":"1","amount":"2"}`, "amount"},
		{"/customers/" + cust + "/credits", `{"amount":"1","Amount":"2"}`, "Amount"},
		{"/customers/" + cust + "/credits", `{"idempotency_key":"a","idempotency_Key":"b","amount":"1"}`, "idempotency_"},
		{"/customers/" + cust + "/keys", `{"name":"k","allowed_models":["a"],"allowed_modelſ":["b"]}`, "allowed_model"},
		{"/customers/" + cust + "/credits", `{"amount":"1","effective_at":"0001-01-01T00:00:00Z"}`, "effective_at"},
		{"/customers/" + cust + "/credits", `{"amount":"1","effective_at":"0001-01-01T01:00:00+01:00"}`, "effective_at"},
		{"/customers/" + cust + "/overrides", `{"model":"m","price":{"currency":"USD","input":"1","input":"0","output":"1"},"effective_from":"2026-01-01T00:00:00Z"}`, "input"},
	} {
		status, body, err := send("POST", s.admin+"/admin/v1"+c.path, adminToken, c.body)
		if err != nil {
			t.Fatal(err)
		}
		invalid(t, c.body, status, body, c.field)
	}
	// As a query's to, the zero time read as no end (all of time); as its
	// from, it is the beginning, as no from is.
	status, body, _ := send("GET", s.admin+"/admin/v1/usage?to=0001-01-01T00:00:00Z", adminToken, "")
	invalid(t, "to=0001-01-01T00:00:00Z", status, body, "to")
	s.adm("GET", "/admin/v1/usage?from=0001-01-01T00:00:00Z", "", http.StatusOK, nil)
	// The same key in two objects, and a time a microsecond after zero.
	s.adm("POST", "/admin/v1/customers/"+cust+"/overrides",
		`{"model":"m","price":{"currency":"USD","input":"1","output":"1"},"effective_from":"2026-01-01T00:00:00Z"}`, http.StatusCreated, nil)
	s.adm("POST", "/admin/v1/customers/"+cust+"/credits", `{"amount":"1","effective_at":"0001-01-01T00:00:00.000001Z"}`, http.StatusCreated, nil)
	var b ledger.Balance
	s.adm("GET", "/admin/v1/customers/"+cust+"/balance", "", http.StatusOK, &b)
	if b.Credits != "1" {
		t.Errorf("credits after the refused bodies = %s, want the one credit booked", b.Credits)
	}
}
