package gemini

import "testing"

func TestModelFromPath(t *testing.T) {
	tests := []struct {
		in, model, method string
		ok                bool
	}{
		{"models/gemini-2.5-flash:streamGenerateContent", "gemini-2.5-flash", "streamGenerateContent", true},
		{"/models/gemini-2.5-pro:generateContent", "gemini-2.5-pro", "generateContent", true},
		{"models/gemini-2.5-flash:streamGenerateContent?alt=sse", "gemini-2.5-flash", "streamGenerateContent", true},
		{"models/gemini%2D2.5:generateContent", "gemini-2.5", "generateContent", true},
		{"models/gemini-2.5-flash:countTokens", "", "", false},
		{"models/gemini-2.5-flash", "", "", false},
		{"models/:generateContent", "", "", false},
		{"models/a/b:generateContent", "a/b", "generateContent", true}, // provider/model
		{"models/a%2Fb:generateContent", "a/b", "generateContent", true},
		{"models/a/:generateContent", "", "", false},
		{"models/a%zz:generateContent", "", "", false},
		{"tunedModels/x:generateContent", "", "", false},
		{"models/a%3AcountTokens:generateContent", "", "", false},
		{"models/p%2Fa%3AstreamGenerateContent:generateContent", "", "", false},
		{"", "", "", false},
	}
	for _, tt := range tests {
		model, method, ok := ModelFromPath(tt.in)
		if model != tt.model || method != tt.method || ok != tt.ok {
			t.Errorf("ModelFromPath(%q) = %q, %q, %v; want %q, %q, %v", tt.in, model, method, ok, tt.model, tt.method, tt.ok)
		}
	}
}

func TestPromptText(t *testing.T) {
	body := `{"systemInstruction":{"parts":[{"text":"Be brief."}]},"contents":[
	  {"role":"user","parts":[{"text":"Hi"},{"inlineData":{"mimeType":"image/png","data":"AAAA"}}]},
	  {"role":"model","parts":[{"functionCall":{"name":"f","args":{"a":1}}}]},
	  {"role":"user","parts":[{"functionResponse":{"name":"f","response":{"content":"ok"}}}]}],
	  "tools":[{"functionDeclarations":[{"name":"f"}]}],"generationConfig":{"temperature":1}}`
	want := "Be brief.\nHi\nf\n{\"a\":1}\nf\n{\"content\":\"ok\"}\n[{\"functionDeclarations\":[{\"name\":\"f\"}]}]"
	if got := PromptText([]byte(body)); got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
	if got := PromptText([]byte("not json")); got != "not json" {
		t.Errorf("not JSON: %q", got)
	}
	if got := PromptText([]byte(`{"contents":"wrong","systemInstruction":{"parts":[{"text":"s"}]}}`)); got != "s" {
		t.Errorf("partly wrong types: %q", got)
	}
	// A translated request's prompt text holds what the client sent.
	_, req, err := Chat{}.Request([]byte(`{"messages":[{"role":"system","content":"S"},{"role":"user","content":"U"}]}`), "m", true)
	if err != nil || PromptText(req) != "S\nU" {
		t.Errorf("translated: %v %q", err, PromptText(req))
	}
}

// TestPromptCountsMediaParts: an estimate of a native Gemini request
// counted its images and documents as nothing (a client attack review:
// a thinking model cut before its first usage report was billed the text
// alone); each inlineData or fileData part is now MediaPartTokens, the
// least Gemini counts for one.
func TestPromptCountsMediaParts(t *testing.T) {
	body := `{"systemInstruction":{"parts":[{"text":"S"}]},"contents":[
	  {"role":"user","parts":[{"text":"Compare"},{"inlineData":{"mimeType":"image/png","data":"AAAA"}},
	    {"inlineData":{"mimeType":"image/jpeg","data":"BBBB"}},{"fileData":{"mimeType":"application/pdf","fileUri":"gs://b/f.pdf"}},
	    {"inlineData":null}]}]}`
	p := Prompt([]byte(body))
	if p.Text != "S\nCompare" || p.Media != 3*MediaPartTokens {
		t.Errorf("Prompt = text %q, media %d; want \"S\\nCompare\" and %d", p.Text, p.Media, 3*MediaPartTokens)
	}
	if p := Prompt([]byte(`{"contents":[{"parts":[{"text":"hi"}]}]}`)); p.Media != 0 {
		t.Errorf("text only: media %d", p.Media)
	}
}

// TestPromptReadsSnakeCaseFields: the Gemini API takes a request's fields
// by their proto names too (system_instruction, inline_data, file_data,
// function_call, function_response), as Google's own REST examples write
// them; the estimate read the camelCase names alone, so a request written
// so was estimated without its system instruction, its images and pages
// (MediaPartTokens each) and its function turns: a thinking model cut
// before its first usage report was billed the contents' text alone.
func TestPromptReadsSnakeCaseFields(t *testing.T) {
	body := `{"system_instruction":{"parts":[{"text":"S"}]},"contents":[
	  {"role":"user","parts":[{"text":"Compare"},{"inline_data":{"mime_type":"image/png","data":"AAAA"}},
	    {"file_data":{"mime_type":"application/pdf","file_uri":"gs://b/f.pdf"}}]},
	  {"role":"model","parts":[{"function_call":{"name":"f","args":{"q":"x"}}}]},
	  {"role":"user","parts":[{"function_response":{"name":"f","response":{"r":"y"}}}]}]}`
	p := Prompt([]byte(body))
	const want = "S\nCompare\nf\n{\"q\":\"x\"}\nf\n{\"r\":\"y\"}"
	if p.Text != want || p.Media != 2*MediaPartTokens {
		t.Errorf("Prompt = text %q, media %d; want %q and %d", p.Text, p.Media, want, 2*MediaPartTokens)
	}
}
