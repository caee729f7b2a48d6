package web

import (
	"errors"
	"testing"
	"time"
)

// TestIssueOnceLetsTheSecretGo: a form sent again within formIssueShown
// gets the key its first sending issued; later it gets none (the secret
// is no longer kept) and issues nothing; a refused issue is not
// remembered, so the form may be sent again.
func TestIssueOnceLetsTheSecretGo(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	s := newSessions("c", "/c/")
	s.now = func() time.Time { return now }
	ss := &session{}
	issued := 0
	issue := func() (*issuedData, error) { issued++; return &issuedData{Secret: "tg-secret"}, nil }
	if k, resent, err := s.issueOnce(ss, "f1", issue); err != nil || resent || k.Secret != "tg-secret" {
		t.Fatalf("first = %+v %v %v", k, resent, err)
	}
	now = now.Add(formIssueShown - time.Second)
	if k, resent, err := s.issueOnce(ss, "f1", issue); err != nil || !resent || k == nil || k.Secret != "tg-secret" {
		t.Fatalf("again within the window = %+v %v %v, want the first key", k, resent, err)
	}
	now = now.Add(2 * time.Second)
	if k, resent, err := s.issueOnce(ss, "f1", issue); err != nil || !resent || k != nil {
		t.Fatalf("again after the window = %+v %v %v, want resent with no key", k, resent, err)
	}
	if ss.issuedBy[0].key.Secret != "" {
		t.Fatalf("the session still holds the secret past the window")
	}
	if issued != 1 {
		t.Fatalf("issued %d keys for one form, want 1", issued)
	}
	refused := errors.New("refused")
	if _, _, err := s.issueOnce(ss, "f2", func() (*issuedData, error) { return nil, refused }); !errors.Is(err, refused) {
		t.Fatalf("refused issue = %v", err)
	}
	if k, resent, err := s.issueOnce(ss, "f2", issue); err != nil || resent || k == nil || issued != 2 {
		t.Fatalf("the refused form sent again = %+v %v %v (issued %d), want a new key", k, resent, err, issued)
	}
	for i := range maxFormIssues + 5 {
		_, _, _ = s.issueOnce(ss, string(rune('A'+i)), issue)
	}
	if len(ss.issuedBy) > maxFormIssues {
		t.Fatalf("the session remembers %d forms, want at most %d", len(ss.issuedBy), maxFormIssues)
	}
}
