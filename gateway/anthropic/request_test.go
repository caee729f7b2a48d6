package anthropic

import (
	"net/http"
	"strings"
	"testing"
)

// TestRequest is a golden table: OpenAI request in, Messages request out
// (compared as JSON values).
func TestRequest(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"minimal: default max_tokens, string system",
			`{"model":"x","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}],"stream":true}`,
			`{"model":"claude-up","max_tokens":4096,"system":"Be brief.","messages":[{"role":"user","content":"Hi"}],"stream":true}`},
		{"system parts and developer become text blocks; sampling and user",
			`{"messages":[{"role":"developer","content":[{"type":"text","text":"A"},{"type":"text","text":""}]},{"role":"user","content":"Hi"},{"role":"system","content":"B"}],
			  "temperature":0.2,"top_p":0.9,"user":"u-1","max_tokens":100,"n":1}`,
			`{"model":"claude-up","max_tokens":100,"system":[{"type":"text","text":"A"},{"type":"text","text":"B"}],
			  "messages":[{"role":"user","content":"Hi"}],"temperature":0.2,"metadata":{"user_id":"u-1"}}`},
		{"images: data URL to base64, https to url",
			`{"messages":[{"role":"user","content":[{"type":"text","text":"What?"},
			  {"type":"image_url","image_url":{"url":"data:image/PNG;base64,iVBORw0K","detail":"low"}},
			  {"type":"image_url","image_url":{"url":"https://example.com/a.jpg"}}]}]}`,
			`{"model":"claude-up","max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"What?"},
			  {"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0K"}},
			  {"type":"image","source":{"type":"url","url":"https://example.com/a.jpg"}}]}]}`},
		{"tool calls and merged tool results",
			`{"messages":[{"role":"user","content":"Weather?"},
			  {"role":"assistant","content":"Checking.","tool_calls":[{"id":"c1","type":"function","function":{"name":"w","arguments":"{\"city\":\"Oslo\"}"}},
			    {"id":"c2","type":"function","function":{"name":"t","arguments":""}}]},
			  {"role":"tool","tool_call_id":"c1","content":"rain"},
			  {"role":"tool","tool_call_id":"c2","content":[{"type":"text","text":"12:00"}]},
			  {"role":"assistant","content":null},
			  {"role":"user","content":"Thanks"}]}`,
			`{"model":"claude-up","max_tokens":4096,"messages":[{"role":"user","content":"Weather?"},
			  {"role":"assistant","content":[{"type":"text","text":"Checking."},
			    {"type":"tool_use","id":"c1","name":"w","input":{"city":"Oslo"}},{"type":"tool_use","id":"c2","name":"t","input":{}}]},
			  {"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"rain"},
			    {"type":"tool_result","tool_use_id":"c2","content":[{"type":"text","text":"12:00"}]}]},
			  {"role":"user","content":"Thanks"}]}`},
		{"tools, named tool_choice, no parallel calls, stop string",
			`{"messages":[{"role":"user","content":"Hi"}],"stop":"END","parallel_tool_calls":false,
			  "tools":[{"type":"function","function":{"name":"w","description":"Weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}},"strict":true}},
			    {"type":"function","function":{"name":"now"}}],
			  "tool_choice":{"type":"function","function":{"name":"w"}}}`,
			`{"model":"claude-up","max_tokens":4096,"messages":[{"role":"user","content":"Hi"}],"stop_sequences":["END"],
			  "tools":[{"name":"w","description":"Weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}},
			    {"name":"now","input_schema":{"type":"object","properties":{}}}],
			  "tool_choice":{"type":"tool","name":"w","disable_parallel_tool_use":true}}`},
		{"tool_choice required, stop array",
			`{"messages":[{"role":"user","content":"Hi"}],"tool_choice":"required","stop":["a","b"],"tools":[{"type":"function","function":{"name":"f"}}]}`,
			`{"model":"claude-up","max_tokens":4096,"messages":[{"role":"user","content":"Hi"}],"stop_sequences":["a","b"],
			  "tools":[{"name":"f","input_schema":{"type":"object","properties":{}}}],"tool_choice":{"type":"any"}}`},
		{"tool_choice none; parallel_tool_calls false alone gives auto",
			`{"messages":[{"role":"user","content":"Hi"}],"tool_choice":"none","tools":[{"type":"function","function":{"name":"f"}}]}`,
			`{"model":"claude-up","max_tokens":4096,"messages":[{"role":"user","content":"Hi"}],
			  "tools":[{"name":"f","input_schema":{"type":"object","properties":{}}}],"tool_choice":{"type":"none"}}`},
		{"parallel_tool_calls false without tool_choice",
			`{"messages":[{"role":"user","content":"Hi"}],"parallel_tool_calls":false,"tools":[{"type":"function","function":{"name":"f"}}]}`,
			`{"model":"claude-up","max_tokens":4096,"messages":[{"role":"user","content":"Hi"}],
			  "tools":[{"name":"f","input_schema":{"type":"object","properties":{}}}],"tool_choice":{"type":"auto","disable_parallel_tool_use":true}}`},
		{"tool_choice without tools is dropped",
			`{"messages":[{"role":"user","content":"Hi"}],"tool_choice":"auto"}`,
			`{"model":"claude-up","max_tokens":4096,"messages":[{"role":"user","content":"Hi"}]}`},
		{"reasoning_effort medium without a limit",
			`{"messages":[{"role":"user","content":"Hi"}],"reasoning_effort":"medium"}`,
			`{"model":"claude-up","max_tokens":8192,"messages":[{"role":"user","content":"Hi"}],"thinking":{"type":"enabled","budget_tokens":4096}}`},
		{"reasoning_effort high without a limit",
			`{"messages":[{"role":"user","content":"Hi"}],"reasoning_effort":"high"}`,
			`{"model":"claude-up","max_tokens":20480,"messages":[{"role":"user","content":"Hi"}],"thinking":{"type":"enabled","budget_tokens":16384}}`},
		{"reasoning_effort xhigh without a limit",
			`{"messages":[{"role":"user","content":"Hi"}],"reasoning_effort":"xhigh"}`,
			`{"model":"claude-up","max_tokens":28672,"messages":[{"role":"user","content":"Hi"}],"thinking":{"type":"enabled","budget_tokens":24576}}`},
		{"reasoning_effort high trimmed to max_completion_tokens (wins over max_tokens)",
			`{"messages":[{"role":"user","content":"Hi"}],"reasoning_effort":"high","max_completion_tokens":2000,"max_tokens":9}`,
			`{"model":"claude-up","max_tokens":2000,"messages":[{"role":"user","content":"Hi"}],"thinking":{"type":"enabled","budget_tokens":1999}}`},
		{"thinking object passes through and wins",
			`{"messages":[{"role":"user","content":"Hi"}],"reasoning_effort":"low","thinking":{"type":"enabled","budget_tokens":10000,"display":"x"}}`,
			`{"model":"claude-up","max_tokens":14096,"messages":[{"role":"user","content":"Hi"}],"thinking":{"type":"enabled","budget_tokens":10000,"display":"x"}}`},
		{"thinking left out of a tool loop's continuation (its thinking block cannot come back)",
			`{"messages":[{"role":"user","content":"Hi"},{"role":"assistant","reasoning_content":"hm","tool_calls":[{"id":"c1","type":"function","function":{"name":"w","arguments":"{}"}}]},
			  {"role":"tool","tool_call_id":"c1","content":"sunny"}],"reasoning_effort":"low","max_completion_tokens":4096}`,
			`{"model":"claude-up","max_tokens":4096,"messages":[{"role":"user","content":"Hi"},
			  {"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"w","input":{}}]},
			  {"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"sunny"}]}]}`},
		{"thinking kept once the user speaks after the tool loop",
			`{"messages":[{"role":"user","content":"Hi"},{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"w","arguments":"{}"}}]},
			  {"role":"tool","tool_call_id":"c1","content":"sunny"},{"role":"assistant","content":"Sunny."},{"role":"user","content":"Thanks"}],
			  "reasoning_effort":"low","max_completion_tokens":4096}`,
			`{"model":"claude-up","max_tokens":4096,"messages":[{"role":"user","content":"Hi"},
			  {"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"w","input":{}}]},
			  {"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"sunny"}]},
			  {"role":"assistant","content":[{"type":"text","text":"Sunny."}]},{"role":"user","content":"Thanks"}],"thinking":{"type":"enabled","budget_tokens":1024}}`},
		// Anthropic refuses thinking with a tool_choice that forces tool
		// use (400 "Thinking may not be enabled when tool_choice forces
		// tool use"), where OpenAI takes reasoning_effort with tool_choice
		// required or a named function: the forced call is what the
		// client asked for, so the request goes without thinking.
		{"thinking left out when tool_choice is required",
			`{"messages":[{"role":"user","content":"Hi"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required",
			  "reasoning_effort":"low","max_completion_tokens":4096}`,
			`{"model":"claude-up","max_tokens":4096,"messages":[{"role":"user","content":"Hi"}],
			  "tools":[{"name":"f","input_schema":{"type":"object","properties":{}}}],"tool_choice":{"type":"any"}}`},
		{"thinking object left out when tool_choice names a function",
			`{"messages":[{"role":"user","content":"Hi"}],"tools":[{"type":"function","function":{"name":"f"}}],
			  "tool_choice":{"type":"function","function":{"name":"f"}},"thinking":{"type":"enabled","budget_tokens":2000},"max_tokens":4096}`,
			`{"model":"claude-up","max_tokens":4096,"messages":[{"role":"user","content":"Hi"}],
			  "tools":[{"name":"f","input_schema":{"type":"object","properties":{}}}],"tool_choice":{"type":"tool","name":"f"}}`},
		{"thinking kept with tool_choice auto",
			`{"messages":[{"role":"user","content":"Hi"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"auto",
			  "reasoning_effort":"low","max_completion_tokens":4096}`,
			`{"model":"claude-up","max_tokens":4096,"messages":[{"role":"user","content":"Hi"}],
			  "tools":[{"name":"f","input_schema":{"type":"object","properties":{}}}],"tool_choice":{"type":"auto"},"thinking":{"type":"enabled","budget_tokens":1024}}`},
		// openai-go's ReasoningEffort has xhigh and max, which OpenAI's
		// newest models take: refused here, the SDK's own values had a
		// 400 through the gateway. Anthropic's budget for them is the
		// most that, with DefaultMaxTokens, fits every thinking model's
		// output limit (32,000 for Opus 4).
		{"reasoning_effort xhigh",
			`{"messages":[{"role":"user","content":"Hi"}],"reasoning_effort":"xhigh"}`,
			`{"model":"claude-up","max_tokens":28672,"messages":[{"role":"user","content":"Hi"}],"thinking":{"type":"enabled","budget_tokens":24576}}`},
		{"reasoning_effort max",
			`{"messages":[{"role":"user","content":"Hi"}],"reasoning_effort":"max"}`,
			`{"model":"claude-up","max_tokens":28672,"messages":[{"role":"user","content":"Hi"}],"thinking":{"type":"enabled","budget_tokens":24576}}`},
		{"reasoning_effort none",
			`{"messages":[{"role":"user","content":"Hi"}],"reasoning_effort":"none","max_tokens":50}`,
			`{"model":"claude-up","max_tokens":50,"messages":[{"role":"user","content":"Hi"}]}`},
		// OpenAI's temperature runs 0 to 2, Anthropic's 0 to 1: sent as it
		// was, 1.5 had Anthropic refuse the request (400 "temperature:
		// range: 0..1") where OpenAI answers. Above 1 it is sent as 1.
		{"temperature above Anthropic's range",
			`{"messages":[{"role":"user","content":"Hi"}],"temperature":1.5}`,
			`{"model":"claude-up","max_tokens":4096,"messages":[{"role":"user","content":"Hi"}],"temperature":1}`},
		// Claude Opus 4.1 and later refuse temperature and top_p together
		// (400 "temperature and top_p cannot both be specified for this
		// model"), where OpenAI takes both, and SDK-built requests often
		// carry both: one goes, the one at its no-op value (top_p 1,
		// temperature 1, Anthropic's default) when there is one, else
		// top_p.
		{"temperature and top_p: top_p at 1 left out",
			`{"messages":[{"role":"user","content":"Hi"}],"temperature":0.2,"top_p":1}`,
			`{"model":"claude-up","max_tokens":4096,"messages":[{"role":"user","content":"Hi"}],"temperature":0.2}`},
		{"temperature and top_p: temperature at Anthropic's default left out",
			`{"messages":[{"role":"user","content":"Hi"}],"temperature":1.5,"top_p":0.3}`,
			`{"model":"claude-up","max_tokens":4096,"messages":[{"role":"user","content":"Hi"}],"top_p":0.3}`},
		{"temperature and top_p: temperature kept",
			`{"messages":[{"role":"user","content":"Hi"}],"temperature":0,"top_p":0.9}`,
			`{"model":"claude-up","max_tokens":4096,"messages":[{"role":"user","content":"Hi"}],"temperature":0}`},
		{"top_p alone kept",
			`{"messages":[{"role":"user","content":"Hi"}],"top_p":0.9}`,
			`{"model":"claude-up","max_tokens":4096,"messages":[{"role":"user","content":"Hi"}],"top_p":0.9}`},
		// response_format json_schema was dropped: the client asked for
		// JSON of a schema and got prose, which Anthropic's structured
		// outputs (output_config.format) would have constrained.
		{"response_format json_schema to output_config.format",
			`{"messages":[{"role":"user","content":"Hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"person","strict":true,
			  "schema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"],"additionalProperties":false}}}}`,
			`{"model":"claude-up","max_tokens":4096,"messages":[{"role":"user","content":"Hi"}],
			  "output_config":{"format":{"type":"json_schema","schema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"],"additionalProperties":false}}}}`},
		{"response_format text and json_object have no equivalent",
			`{"messages":[{"role":"user","content":"Hi"}],"response_format":{"type":"json_object"}}`,
			`{"model":"claude-up","max_tokens":4096,"messages":[{"role":"user","content":"Hi"}]}`},
		{"text passes unescaped",
			`{"messages":[{"role":"user","content":"<b>&</b>"}]}`,
			`{"model":"claude-up","max_tokens":4096,"messages":[{"role":"user","content":"<b>&</b>"}]}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			path, got, err := Chat{}.Request([]byte(c.in), "claude-up", strings.Contains(c.in, `"stream":true`))
			if err != nil {
				t.Fatal(err)
			}
			if path != "/messages" {
				t.Errorf("path %q", path)
			}
			if !jsonEqual(t, got, []byte(c.want)) {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
		})
	}
}

// TestRequestErrors checks that each client error names its field.
func TestRequestErrors(t *testing.T) {
	user := `{"role":"user","content":"Hi"}`
	for _, c := range []struct{ in, want string }{
		{`{"messages":[` + user + `,{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"[1]"}}]}]}`,
			"messages[2].tool_calls[0].function.arguments: not a JSON object"},
		{`{"messages":[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":"{oops"}}]}]}`,
			"messages[0].tool_calls[0].function.arguments: not a JSON object"},
		{`{"messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f"}}]}]}`, "messages[0].tool_calls[0].id: missing"},
		{`{"messages":[` + user + `,{"role":"robot","content":"x"}]}`, `messages[1].role: unknown role "robot"`},
		{`{"messages":[{"role":5}]}`, "messages[0].role: want a string, got number"},
		{`{"messages":{}}`, "messages: want an array, got object"},
		{`{"messages":[`, "request body: unexpected end of JSON input"},
		{`{"messages":[]}`, "messages: no user or assistant message"},
		{`{"messages":[{"role":"user","content":""}]}`, "messages[0].content: empty"},
		{`{"messages":[{"role":"user","content":5}]}`, "messages[0].content: want a string or an array of content parts"},
		{`{"messages":[{"role":"user","content":[{"type":"input_audio"}]}]}`, `messages[0].content[0].type: "input_audio" parts are not supported here`},
		{`{"messages":[{"role":"system","content":[{"type":"image_url","image_url":{"url":"https://x"}}]},` + user + `]}`, `messages[0].content[0].type: "image_url" parts are not supported here`},
		{`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"ftp://x"}}]}]}`, "messages[0].content[0].image_url.url: want a data: URL or an http(s) URL"},
		{`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png,abc"}}]}]}`, "messages[0].content[0].image_url.url: a data URL must hold base64 data"},
		{`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/bmp;base64,Qk0="}}]}]}`, `messages[0].content[0].image_url.url: media type "image/bmp" is not supported`},
		{`{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}`, "messages[0].content[0].image_url: missing"},
		{`{"messages":[{"role":"tool","content":"x"}]}`, "messages[0].tool_call_id: missing"},
		{`{"messages":[` + user + `],"tools":[{"type":"custom","custom":{"name":"g"}}]}`, `tools[0].type: "custom" tools are not supported`},
		{`{"messages":[` + user + `],"tools":[{"type":"function","function":{"name":"f","parameters":[]}}]}`, "tools[0].function.parameters: not a JSON object"},
		{`{"messages":[` + user + `],"tools":[{"type":"function","function":{}}]}`, "tools[0].function.name: missing"},
		{`{"messages":[` + user + `],"tool_choice":"sometimes"}`, `tool_choice: unknown value "sometimes"`},
		{`{"messages":[` + user + `],"tool_choice":{"type":"allowed_tools"}}`, "tool_choice: want"},
		{`{"messages":[` + user + `],"tool_choice":3}`, "tool_choice: want a string or an object"},
		{`{"messages":[` + user + `],"stop":5}`, "stop: want a string or an array of strings"},
		{`{"messages":[` + user + `],"stop":[5]}`, "stop: want a string, got number"},
		{`{"messages":[` + user + `],"n":2}`, "n: Anthropic returns one choice"},
		{`{"messages":[` + user + `],"max_tokens":0}`, "max_tokens: must be positive, got 0"},
		{`{"messages":[` + user + `],"max_completion_tokens":1.5}`, "max_completion_tokens: want a number, got number 1.5"},
		{`{"messages":[` + user + `],"reasoning_effort":"low","max_completion_tokens":1000}`, "reasoning_effort: thinking needs max_completion_tokens above 1024, got 1000"},
		{`{"messages":[` + user + `],"reasoning_effort":"extreme"}`, `reasoning_effort: unknown value "extreme"`},
		{`{"messages":[` + user + `],"thinking":"on"}`, "thinking: not a JSON object"},
		{`{"messages":[` + user + `],"response_format":{"type":"json_schema","json_schema":{"name":"x"}}}`, "response_format.json_schema.schema: not a JSON object"},
	} {
		_, _, err := Chat{}.Request([]byte(c.in), "claude-up", false)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s\n error %v\n  want %q...", c.in, err, c.want)
		}
	}
}

func TestHeader(t *testing.T) {
	h := http.Header{}
	Auth(h, "sk-ant-1")
	if h.Get("X-Api-Key") != "sk-ant-1" || h.Get("Anthropic-Version") != "2023-06-01" || h.Get("Content-Type") != "application/json" {
		t.Errorf("headers %v", h)
	}
}
