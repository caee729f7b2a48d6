package gemini

import (
	"net/http"
	"strings"
	"testing"
)

func TestRequest(t *testing.T) {
	tests := []struct {
		name, model string
		stream      bool
		in          string
		path, want  string
	}{
		{"system, developer and user; streamed", "gemini-2.5-flash", true,
			`{"model":"x","stream":true,"messages":[{"role":"system","content":"Be brief."},{"role":"developer","content":[{"type":"text","text":"No emoji."}]},{"role":"user","content":"Hi"}]}`,
			"/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
			`{"systemInstruction":{"parts":[{"text":"Be brief."},{"text":"No emoji."}]},"contents":[{"role":"user","parts":[{"text":"Hi"}]}]}`},
		{"generation config", "models/gemini-2.5-pro", false,
			`{"messages":[{"role":"user","content":"Hi"}],"max_tokens":100,"max_completion_tokens":50,"temperature":0,"top_p":0.9,
			  "stop":"END","n":2,"seed":7,"presence_penalty":0.5,"frequency_penalty":-0.5,"reasoning_effort":"medium",
			  "response_format":{"type":"json_schema","json_schema":{"name":"s","schema":{"type":"object"}}},"user":"ignored"}`,
			"/models/gemini-2.5-pro:generateContent",
			`{"contents":[{"role":"user","parts":[{"text":"Hi"}]}],"generationConfig":{"maxOutputTokens":50,"temperature":0,"topP":0.9,
			  "stopSequences":["END"],"candidateCount":2,"seed":7,"presencePenalty":0.5,"frequencyPenalty":-0.5,
			  "responseMimeType":"application/json","responseJsonSchema":{"type":"object"},"thinkingConfig":{"thinkingBudget":8192,"includeThoughts":true}}}`},
		{"effort none, json_object, stop array", "gemini-2.5-flash", false,
			`{"messages":[{"role":"user","content":"Hi"}],"reasoning_effort":"none","response_format":{"type":"json_object"},"stop":["a","b"],"temperature":null}`,
			"/models/gemini-2.5-flash:generateContent",
			`{"contents":[{"role":"user","parts":[{"text":"Hi"}]}],"generationConfig":{"stopSequences":["a","b"],"responseMimeType":"application/json","thinkingConfig":{"thinkingBudget":0}}}`},
		// openai-go's ReasoningEffort has max beside xhigh: refused, the
		// SDK's own value had a 400 through the gateway.
		{"effort max", "gemini-2.5-flash", false,
			`{"messages":[{"role":"user","content":"Hi"}],"reasoning_effort":"max"}`,
			"/models/gemini-2.5-flash:generateContent",
			`{"contents":[{"role":"user","parts":[{"text":"Hi"}]}],"generationConfig":{"thinkingConfig":{"thinkingBudget":24576,"includeThoughts":true}}}`},
		{"media parts", "gemini-2.5-flash", false,
			`{"messages":[{"role":"user","content":[{"type":"text","text":"What?"},
			  {"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo=","detail":"high"}},
			  {"type":"image_url","image_url":{"url":"https://example.com/cat.jpg?x=1"}},
			  {"type":"image_url","image_url":"https://example.com/image"},
			  {"type":"image_url","image_url":{"url":"data:text/plain,a%20b"}},
			  {"type":"input_audio","input_audio":{"data":"UklGRg==","format":"wav"}},
			  {"type":"file","file":{"file_data":"data:application/pdf;base64,JVBERi0=","filename":"a.pdf"}},
			  {"type":"file","file":{"file_data":"JVBERi0=","filename":"b.pdf"}}]}]}`,
			"/models/gemini-2.5-flash:generateContent",
			`{"contents":[{"role":"user","parts":[{"text":"What?"},{"inlineData":{"mimeType":"image/png","data":"iVBORw0KGgo="}},
			  {"fileData":{"mimeType":"image/jpeg","fileUri":"https://example.com/cat.jpg?x=1"}},
			  {"fileData":{"mimeType":"image/*","fileUri":"https://example.com/image"}},
			  {"inlineData":{"mimeType":"text/plain","data":"YSBi"}},
			  {"inlineData":{"mimeType":"audio/wav","data":"UklGRg=="}},
			  {"inlineData":{"mimeType":"application/pdf","data":"JVBERi0="}},
			  {"inlineData":{"mimeType":"application/pdf","data":"JVBERi0="}}]}]}`},
		{"tool conversation, Gemini 3 signatures", "gemini-3-pro-preview", true,
			`{"messages":[{"role":"user","content":"Weather in Paris and Rome?"},
			  {"role":"assistant","content":null,"tool_calls":[
			    {"id":"call_0","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Paris\"}"}},
			    {"id":"call_1","type":"function","function":{"name":"weather_eu","arguments":""}}]},
			  {"role":"tool","tool_call_id":"call_0","content":"18C"},
			  {"role":"tool","tool_call_id":"call_1","content":[{"type":"text","text":"21"},{"type":"text","text":"C"}]},
			  {"role":"assistant","content":"Paris 18C, Rome 21C."},
			  {"role":"user","content":"Thanks"}],
			  "tools":[{"type":"function","function":{"name":"weather","description":"Weather now","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}},
			           {"type":"function","function":{"name":"weather_eu","parameters":{"type":"object","properties":{}}}}],
			  "tool_choice":{"type":"function","function":{"name":"weather"}}}`,
			"/models/gemini-3-pro-preview:streamGenerateContent?alt=sse",
			`{"contents":[{"role":"user","parts":[{"text":"Weather in Paris and Rome?"}]},
			  {"role":"model","parts":[{"functionCall":{"name":"weather","args":{"city":"Paris"}},"thoughtSignature":"skip_thought_signature_validator"},
			                           {"functionCall":{"name":"weather_eu","args":{}},"thoughtSignature":"skip_thought_signature_validator"}]},
			  {"role":"user","parts":[{"functionResponse":{"name":"weather","response":{"content":"18C"}}},
			                          {"functionResponse":{"name":"weather_eu","response":{"content":"21C"}}}]},
			  {"role":"model","parts":[{"text":"Paris 18C, Rome 21C."}]},
			  {"role":"user","parts":[{"text":"Thanks"}]}],
			 "tools":[{"functionDeclarations":[{"name":"weather","description":"Weather now","parametersJsonSchema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}},{"name":"weather_eu"}]}],
			 "toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["weather"]}}}`},
		{"reused tool call ids resolve to the latest; no signature before Gemini 3", "gemini-2.5-flash", false,
			`{"messages":[{"role":"user","content":"go"},
			  {"role":"assistant","tool_calls":[{"id":"call_0","function":{"name":"a","arguments":"{}"}}]},
			  {"role":"tool","tool_call_id":"call_0","content":"1"},
			  {"role":"assistant","tool_calls":[{"id":"call_0","function":{"name":"b","arguments":"{}"}}]},
			  {"role":"tool","tool_call_id":"call_0","content":"2"},
			  {"role":"function","name":"legacy","content":"3"}],"tool_choice":"required"}`,
			"/models/gemini-2.5-flash:generateContent",
			`{"contents":[{"role":"user","parts":[{"text":"go"}]},
			  {"role":"model","parts":[{"functionCall":{"name":"a","args":{}}}]},
			  {"role":"user","parts":[{"functionResponse":{"name":"a","response":{"content":"1"}}}]},
			  {"role":"model","parts":[{"functionCall":{"name":"b","args":{}}}]},
			  {"role":"user","parts":[{"functionResponse":{"name":"b","response":{"content":"2"}}},{"functionResponse":{"name":"legacy","response":{"content":"3"}}}]}],
			 "toolConfig":{"functionCallingConfig":{"mode":"ANY"}}}`},
		{"tool_choice auto, empty messages skipped, model escaped", "tuned/a:b", false,
			`{"messages":[{"role":"user","content":""},{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"refusal","refusal":"no"}]}],"tool_choice":"auto"}`,
			"/models/tuned%2Fa%3Ab:generateContent",
			`{"contents":[{"role":"user","parts":[{"text":"x"}]},{"role":"model","parts":[{"text":"no"}]}],"toolConfig":{"functionCallingConfig":{"mode":"AUTO"}}}`},
		{"consecutive messages of one role share a turn; tool results do not", "m", false,
			`{"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"},
			  {"role":"assistant","content":"c"},{"role":"assistant","content":"d","tool_calls":[{"id":"1","function":{"name":"f","arguments":"{}"}}]},
			  {"role":"tool","tool_call_id":"1","content":"r"},{"role":"user","content":"e"}]}`,
			"/models/m:generateContent",
			`{"contents":[{"role":"user","parts":[{"text":"a"},{"text":"b"}]},
			  {"role":"model","parts":[{"text":"c"},{"text":"d"},{"functionCall":{"name":"f","args":{}},"thoughtSignature":"skip_thought_signature_validator"}]},
			  {"role":"user","parts":[{"functionResponse":{"name":"f","response":{"content":"r"}}}]},
			  {"role":"user","parts":[{"text":"e"}]}]}`},
		// Gemini refuses an empty part (no data) and a turn with no parts:
		// empty text parts and messages that leave no parts are dropped.
		{"empty parts and empty messages dropped", "gemini-2.5-flash", false,
			`{"messages":[{"role":"user","content":[{"type":"text","text":""},{"type":"text","text":"a"}]},
			  {"role":"assistant","content":""},{"role":"assistant","content":[{"type":"text","text":""}]},{"role":"user","content":"b"}]}`,
			"/models/gemini-2.5-flash:generateContent",
			`{"contents":[{"role":"user","parts":[{"text":"a"},{"text":"b"}]}]}`},
		{"media URLs: http and gs, MIME types without parameters, data URL parameters and a literal +", "gemini-2.5-flash", false,
			`{"messages":[{"role":"user","content":[
			  {"type":"image_url","image_url":{"url":"http://example.com/a.png"}},
			  {"type":"image_url","image_url":"gs://bucket/b.webp"},
			  {"type":"image_url","image_url":{"url":"https://example.com/notes.txt"}},
			  {"type":"image_url","image_url":{"url":"data:image/png;name=a.png;base64,iVBORw0KGgo="}},
			  {"type":"image_url","image_url":{"url":"data:text/plain,1+1%3D2"}},
			  {"type":"file","file":{"file_data":"aGk=","filename":"notes.txt"}}]}]}`,
			"/models/gemini-2.5-flash:generateContent",
			`{"contents":[{"role":"user","parts":[{"fileData":{"mimeType":"image/png","fileUri":"http://example.com/a.png"}},
			  {"fileData":{"mimeType":"image/webp","fileUri":"gs://bucket/b.webp"}},
			  {"fileData":{"mimeType":"text/plain","fileUri":"https://example.com/notes.txt"}},
			  {"inlineData":{"mimeType":"image/png","data":"iVBORw0KGgo="}},
			  {"inlineData":{"mimeType":"text/plain","data":"MSsxPTI="}},
			  {"inlineData":{"mimeType":"text/plain","data":"aGk="}}]}]}`},
		// Valid values at and inside the bounds pass; response_format text
		// (which SDKs send by default) is no constraint; an empty tools
		// array sends no tool (a Tool with no declarations is refused); a
		// schema with no type or properties of its own is kept; arguments
		// with surrounding whitespace are the object they hold.
		{"option edges", "gemini-2.5-flash", false,
			`{"messages":[{"role":"user","content":"x"},
			  {"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":" {\"a\":\"1\"}\n"}}]}],
			  "seed":-1,"presence_penalty":-1.5,"frequency_penalty":-2,"response_format":{"type":"text"},"tools":[]}`,
			"/models/gemini-2.5-flash:generateContent",
			`{"contents":[{"role":"user","parts":[{"text":"x"}]},{"role":"model","parts":[{"functionCall":{"name":"f","args":{"a":"1"}}}]}],
			  "generationConfig":{"seed":-1,"presencePenalty":-1.5,"frequencyPenalty":-2}}`},
		{"a tool schema without type", "gemini-2.5-flash", false,
			`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"$ref":"#/$defs/A","$defs":{"A":{"type":"object","properties":{"a":{"type":"string"}}}}}}}]}`,
			"/models/gemini-2.5-flash:generateContent",
			`{"contents":[{"role":"user","parts":[{"text":"x"}]}],
			  "tools":[{"functionDeclarations":[{"name":"f","parametersJsonSchema":{"$ref":"#/$defs/A","$defs":{"A":{"type":"object","properties":{"a":{"type":"string"}}}}}}]}]}`},
		{"tool_choice none", "m", false,
			`{"messages":[{"role":"user","content":"x"}],"tool_choice":"none"}`,
			"/models/m:generateContent",
			`{"contents":[{"role":"user","parts":[{"text":"x"}]}],"toolConfig":{"functionCallingConfig":{"mode":"NONE"}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path, body, err := Chat{}.Request([]byte(tt.in), tt.model, tt.stream)
			if err != nil {
				t.Fatal(err)
			}
			if path != tt.path {
				t.Errorf("path %q, want %q", path, tt.path)
			}
			if !jsonEqual(t, body, []byte(tt.want)) {
				t.Errorf("body\n%s\nwant\n%s", body, tt.want)
			}
		})
	}
}

func TestRequestErrors(t *testing.T) {
	user := `"messages":[{"role":"user","content":"x"}]`
	tests := []struct{ in, field string }{
		{`[]`, "JSON object"},
		{`{}`, "messages:"},
		{`{"messages":[]}`, "messages:"},
		{`{"messages":[1]}`, "messages[0]:"},
		{`{"messages":[{"role":"system","content":"s"}]}`, "messages:"},
		{`{"messages":[{"role":"robot","content":"x"}]}`, "messages[0].role"},
		{`{"messages":[{"role":"user","content":42}]}`, "messages[0].content"},
		{`{"messages":[{"role":"system","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AA"}}]}]}`, "messages[0].content[0].type"},
		{`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"ftp://x/y.png"}}]}]}`, "messages[0].content[0].image_url.url"},
		{`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:,abc"}}]}]}`, "messages[0].content[0].image_url.url"},
		{`{"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AA"}}]}]}`, "messages[0].content[0].input_audio"},
		{`{"messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-1"}}]}]}`, "messages[0].content[0].file.file_id"},
		{`{"messages":[{"role":"user","content":[{"type":"file","file":{"file_data":"AA","filename":"x"}}]}]}`, "messages[0].content[0].file.filename"},
		{`{"messages":[{"role":"user","content":[{"type":"video"}]}]}`, "messages[0].content[0].type"},
		{`{"messages":[{"role":"user","content":"x"},{"role":"tool","tool_call_id":"nope","content":"r"}]}`, "messages[1].tool_call_id"},
		{`{"messages":[{"role":"user","content":"x"},{"role":"function","content":"r"}]}`, "messages[1].name"},
		{`{"messages":[{"role":"assistant","tool_calls":[{"id":"a","function":{"name":"f","arguments":"[1]"}}]}]}`, "messages[0].tool_calls[0].function.arguments"},
		{`{"messages":[{"role":"assistant","tool_calls":[{"id":"a","function":{"name":"f","arguments":"{"}}]}]}`, "messages[0].tool_calls[0].function.arguments"},
		{`{"messages":[{"role":"assistant","tool_calls":[{"id":"a","function":{"arguments":"{}"}}]}]}`, "messages[0].tool_calls[0].function.name"},
		{`{` + user + `,"max_tokens":"10"}`, "max_tokens: must be an integer"},
		{`{` + user + `,"max_completion_tokens":0}`, "max_completion_tokens: must be at least 1"},
		{`{` + user + `,"temperature":"hot"}`, "temperature: must be a number"},
		{`{` + user + `,"n":0}`, "n:"},
		{`{` + user + `,"stop":5}`, "stop:"},
		{`{` + user + `,"reasoning_effort":"extreme"}`, "reasoning_effort:"},
		{`{` + user + `,"response_format":{"type":"yaml"}}`, "response_format.type"},
		{`{` + user + `,"response_format":{"type":"json_schema","json_schema":{"name":"x"}}}`, "response_format.json_schema.schema"},
		{`{` + user + `,"tools":{}}`, "tools:"},
		{`{` + user + `,"tools":[{"type":"web_search"}]}`, "tools[0]"},
		{`{` + user + `,"tool_choice":"sometimes"}`, "tool_choice:"},
		{`{` + user + `,"tool_choice":{"type":"function"}}`, "tool_choice:"},
		// Malformed parts and tools: a 400 naming the field, not a panic, a
		// silently dropped part or an empty one Gemini refuses.
		{`{"messages":[{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}]}`, "messages[1].content[0].type"},
		{`{"messages":[{"role":"user","content":[{"type":"input_audio"}]}]}`, "messages[0].content[0].input_audio"},
		{`{"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"format":"wav"}}]}]}`, "messages[0].content[0].input_audio"},
		{`{"messages":[{"role":"user","content":[{"type":"file"}]}]}`, "messages[0].content[0].file"},
		{`{"messages":[{"role":"user","content":[{"type":"file","file":{}}]}]}`, "messages[0].content[0].file.file_data"},
		{`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:text/plain,100%"}}]}]}`, "messages[0].content[0].image_url.url"},
		{`{` + user + `,"tools":[{"type":"custom","function":{"name":"f"}}]}`, "tools[0]"},
		{`{` + user + `,"tools":[{"type":"function"}]}`, "tools[0]"},
		{`{` + user + `,"tools":[{"type":"function","function":{"description":"d"}}]}`, "tools[0]"},
		{`{` + user + `,"tool_choice":{"function":{"name":"f"}}}`, "tool_choice:"},
		// Out-of-range options: refused here, not sent for Gemini to refuse
		// or (maxOutputTokens 0, proto3's "unset") to read as the model's
		// default limit.
		{`{` + user + `,"max_tokens":0}`, "max_tokens: must be at least 1"},
		{`{` + user + `,"temperature":-0.5}`, "temperature: must be at least 0"},
		{`{` + user + `,"top_p":-0.1}`, "top_p: must be at least 0"},
		{`{` + user + `,"presence_penalty":-2.5}`, "presence_penalty: must be at least -2"},
		{`{` + user + `,"frequency_penalty":-3}`, "frequency_penalty: must be at least -2"},
	}
	for _, tt := range tests {
		_, _, err := Chat{}.Request([]byte(tt.in), "m", false)
		if err == nil || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("%s: error %v, want one naming %q", tt.in, err, tt.field)
		}
	}
}

func TestHeader(t *testing.T) {
	h := http.Header{}
	Auth(h, "k")
	if h.Get("x-goog-api-key") != "k" || h.Get("Content-Type") != "application/json" || h.Get("Authorization") != "" {
		t.Errorf("header %v", h)
	}
}

// TestRequestToolParametersAsJSONSchema: OpenAI's function parameters are
// JSON Schema, and OpenAI's strict mode requires additionalProperties
// false on every object; SDK helpers also write $defs/$ref, const and
// type arrays. Sent as a FunctionDeclaration's "parameters" (Gemini's
// OpenAPI subset, which knows none of these), Gemini refused the request
// with 400 INVALID_ARGUMENT ("Unknown name \"additionalProperties\""). They
// belong in "parametersJsonSchema", the field Gemini documents for a JSON
// Schema, as response_format's schema already goes to responseJsonSchema.
func TestRequestToolParametersAsJSONSchema(t *testing.T) {
	schema := `{"type":"object","properties":{"city":{"$ref":"#/$defs/City"},"unit":{"type":["string","null"],"enum":["c","f",null]}},"required":["city","unit"],"additionalProperties":false,"$defs":{"City":{"type":"string","const":"Paris"}}}`
	in := `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"weather","strict":true,"parameters":` + schema + `}}]}`
	_, body, err := Chat{}.Request([]byte(in), "gemini-2.5-flash", false)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"contents":[{"role":"user","parts":[{"text":"x"}]}],"tools":[{"functionDeclarations":[{"name":"weather","parametersJsonSchema":` + schema + `}]}]}`
	if !jsonEqual(t, body, []byte(want)) {
		t.Errorf("body\n%s\nwant\n%s", body, want)
	}
}

// TestRequestReasoningEfforts pins each reasoning_effort's thinking budget
// (Request's documented table): the budget bounds the thinking tokens
// billed as output.
func TestRequestReasoningEfforts(t *testing.T) {
	for effort, want := range map[string]string{
		"none":    `{"thinkingBudget":0}`,
		"minimal": `{"thinkingBudget":1024,"includeThoughts":true}`,
		"low":     `{"thinkingBudget":1024,"includeThoughts":true}`,
		"medium":  `{"thinkingBudget":8192,"includeThoughts":true}`,
		"high":    `{"thinkingBudget":24576,"includeThoughts":true}`,
		"xhigh":   `{"thinkingBudget":24576,"includeThoughts":true}`,
		"max":     `{"thinkingBudget":24576,"includeThoughts":true}`,
	} {
		_, body, err := Chat{}.Request([]byte(`{"messages":[{"role":"user","content":"x"}],"reasoning_effort":"`+effort+`"}`), "gemini-2.5-flash", false)
		if err != nil {
			t.Fatalf("%s: %v", effort, err)
		}
		want = `{"contents":[{"role":"user","parts":[{"text":"x"}]}],"generationConfig":{"thinkingConfig":` + want + `}}`
		if !jsonEqual(t, body, []byte(want)) {
			t.Errorf("%s: body\n%s\nwant\n%s", effort, body, want)
		}
	}
}

// TestRequestLegacyFunctionCall: a legacy function result (role
// "function", which Request translates) answers the assistant's
// deprecated function_call, which was dropped: the model turn before the
// functionResponse vanished, and Gemini refuses a function response turn
// that does not follow a function call turn.
func TestRequestLegacyFunctionCall(t *testing.T) {
	in := `{"messages":[{"role":"user","content":"x"},
	  {"role":"assistant","content":null,"function_call":{"name":"f","arguments":"{\"a\":1}"}},
	  {"role":"function","name":"f","content":"r"}]}`
	_, body, err := Chat{}.Request([]byte(in), "gemini-3-pro-preview", false)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"contents":[{"role":"user","parts":[{"text":"x"}]},
	  {"role":"model","parts":[{"functionCall":{"name":"f","args":{"a":1}},"thoughtSignature":"skip_thought_signature_validator"}]},
	  {"role":"user","parts":[{"functionResponse":{"name":"f","response":{"content":"r"}}}]}]}`
	if !jsonEqual(t, body, []byte(want)) {
		t.Errorf("body\n%s\nwant\n%s", body, want)
	}
	for _, bad := range []string{`{"arguments":"{}"}`, `{"name":"f","arguments":"[]"}`} {
		in := `{"messages":[{"role":"assistant","function_call":` + bad + `}]}`
		if _, _, err := (Chat{}).Request([]byte(in), "m", false); err == nil || !strings.Contains(err.Error(), "messages[0].function_call.") {
			t.Errorf("%s: error %v, want one naming messages[0].function_call", in, err)
		}
	}
}

// TestRequestEmptySystemMessage: a system message with no text (clients
// send an empty system prompt) made systemInstruction {"parts":null}, a
// Content without parts, which Gemini refuses as it does an empty turn.
func TestRequestEmptySystemMessage(t *testing.T) {
	for _, sys := range []string{`""`, `null`, `[{"type":"text","text":""}]`} {
		in := `{"messages":[{"role":"system","content":` + sys + `},{"role":"user","content":"x"}]}`
		_, body, err := Chat{}.Request([]byte(in), "gemini-2.5-flash", false)
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"contents":[{"role":"user","parts":[{"text":"x"}]}]}`; !jsonEqual(t, body, []byte(want)) {
			t.Errorf("%s: body\n%s\nwant\n%s", sys, body, want)
		}
	}
}
