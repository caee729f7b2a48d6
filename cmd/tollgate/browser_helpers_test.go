package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/chromedp"
)

// The browser tests drive Debian's chromium (TOLLGATE_CHROMIUM, else
// chromium on the PATH) headless with chromedp: one browser process for
// the test binary, one tab in its own browser context (own cookies) per
// user. Without chromium they skip, and under CI=true they fail.
var chromium struct {
	once sync.Once
	ctx  context.Context
	err  error
	// stop ends the browser and waits for chromedp to remove the profile
	// directory it made (/tmp/chromedp-runner*): TestMain calls it, after
	// closing the browser.
	stop context.CancelFunc
}

// TestMain runs the package's tests, then stops the browser the browser
// tests shared, if one started: left running to the binary's exit, its
// profile directory stayed behind in /tmp after every run.
func TestMain(m *testing.M) {
	code := m.Run()
	if chromium.stop != nil {
		// Closed (Browser.close) rather than killed, chromium removes its
		// own singleton directory (/tmp/org.chromium.Chromium.*) too.
		_ = chromedp.Cancel(chromium.ctx)
		chromium.stop()
	}
	os.Exit(code)
}

// browserTab returns a new tab with its own cookies, closed at the test's end.
func browserTab(t *testing.T) context.Context {
	t.Helper()
	path := os.Getenv("TOLLGATE_CHROMIUM")
	if path == "" {
		path, _ = exec.LookPath("chromium")
	}
	if path == "" {
		if ci := os.Getenv("CI"); ci != "" && ci != "false" && ci != "0" {
			t.Fatal("chromium is not installed (apt-get install chromium, or set TOLLGATE_CHROMIUM); the browser tests cannot run")
		}
		t.Skip("chromium is not installed (apt-get install chromium, or set TOLLGATE_CHROMIUM): browser test skipped")
	}
	chromium.once.Do(func() {
		opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU)
		alloc, stop := chromedp.NewExecAllocator(context.Background(), opts...) // lives as long as the test binary
		chromium.stop = stop
		chromium.ctx, _ = chromedp.NewContext(alloc)
		_, chromium.err = chromedp.Run(chromium.ctx, chromedp.Title()) // starts the browser
	})
	if chromium.err != nil {
		t.Fatalf("start chromium (%s): %v", path, chromium.err)
	}
	tab, cancel := chromedp.NewContext(chromium.ctx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if _, err := chromedp.Run(tab, chromedp.Title()); err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	return tab
}

// do runs browser actions within 30 seconds, failing the test on error.
func do(t *testing.T, tab context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatal(err)
	}
}

// navigate runs steps that load a page (a click on a link or a form's
// button) and waits for the page.
func navigate(t *testing.T, tab context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, 30*time.Second)
	defer cancel()
	if _, err := chromedp.RunResponse(ctx, steps...); err != nil {
		t.Fatal(err)
	}
}

// run runs one browser action and returns its value.
func run[T any](t *testing.T, tab context.Context, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(tab, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// text is the visible text of the first element sel matches, spaces collapsed.
func text(t *testing.T, tab context.Context, sel string) string {
	t.Helper()
	return strings.Join(strings.Fields(run(t, tab, chromedp.Text(chromedp.CSS(sel)))), " ")
}

// page navigates to url and returns the whole document's HTML.
func page(t *testing.T, tab context.Context, url string) string {
	t.Helper()
	do(t, tab, chromedp.Navigate(url), chromedp.WaitReady(chromedp.CSS("main")))
	return run(t, tab, chromedp.OuterHTML(chromedp.CSS("html")))
}

// signInBrowser fills the sign-in form of app (console or portal) at base
// with secret in the password field named field, and returns the page's
// location after the form's answer.
func signInBrowser(t *testing.T, tab context.Context, base, app, field, secret string) string {
	t.Helper()
	do(t, tab, chromedp.Navigate(base+"/"+app+"/signin"),
		chromedp.WaitVisible(chromedp.CSS(`input[type=password][name=`+field+`]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name=`+field+`]`), secret))
	navigate(t, tab, chromedp.Click(chromedp.CSS(`main button[type=submit]`)))
	return run(t, tab, chromedp.Location())
}

// download clicks the link sel and returns the file the browser saved.
func download(t *testing.T, tab context.Context, sel string) []byte {
	t.Helper()
	dir := t.TempDir()
	c := chromedp.FromContext(tab)
	do(t, tab, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
			Behavior: browser.SetDownloadBehaviorBehaviorAllowAndName, BrowserContextID: c.BrowserContextID, DownloadPath: dir})
		return err
	}), chromedp.Click(chromedp.CSS(sel)))
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		files, _ := filepath.Glob(filepath.Join(dir, "*"))
		if len(files) == 1 && !strings.HasSuffix(files[0], ".crdownload") {
			b, err := os.ReadFile(files[0])
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no download from %s", sel)
	return nil
}

// httpGet GETs url with a bearer token and returns the body, wanting 200.
func httpGet(t *testing.T, url, token string) []byte {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d %s", url, resp.StatusCode, b)
	}
	return b
}

// getJSON is httpGet decoding into out.
func getJSON(t *testing.T, url, token string, out any) {
	t.Helper()
	if err := json.Unmarshal(httpGet(t, url, token), out); err != nil {
		t.Fatal(err)
	}
}

// chat sends one non-streamed chat completion with key and returns the
// status and the request id.
func chat(t *testing.T, gateway, key, model string) (int, string) {
	t.Helper()
	body := `{"model":"` + model + `","max_tokens":12,"messages":[{"role":"user","content":"hello from the browser test"}]}`
	req, _ := http.NewRequest("POST", gateway+"/v1/chat/completions", bytes.NewBufferString(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("X-Request-Id")
}

// sumCosts sums decimal costs per currency as the pages show them: "1.5 USD".
func sumCosts(rows []struct{ Cost, Currency string }) string {
	sums := map[string]*big.Rat{}
	var order []string
	for _, r := range rows {
		v, ok := new(big.Rat).SetString(r.Cost)
		if !ok || r.Currency == "" {
			continue
		}
		if sums[r.Currency] == nil {
			sums[r.Currency] = new(big.Rat)
			order = append(order, r.Currency)
		}
		sums[r.Currency].Add(sums[r.Currency], v)
	}
	if len(order) == 0 {
		return "0"
	}
	slices.Sort(order)
	var parts []string
	for _, c := range order {
		s := strings.TrimRight(strings.TrimRight(sums[c].FloatString(12), "0"), ".")
		parts = append(parts, s+" "+c)
	}
	return strings.Join(parts, " · ")
}
