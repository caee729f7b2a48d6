package main

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestADataDirectoryInUseNamesItsHolder: a gateway started on a data
// directory that a meter or admin process holds for the moment of an
// embedded store's hand-over was told "each gateway needs a data
// directory of its own", which misled (the directory is the gateway's;
// the hand-over takes seconds, and is retried). The refusal now says what
// holds it: the hand-over, and to start again once it is done; any other
// holder is named by its role.
func TestADataDirectoryInUseNamesItsHolder(t *testing.T) {
	pid := strconv.Itoa(os.Getpid())
	for _, c := range []struct {
		purpose string
		want    []string
		not     string
	}{
		{handOverPurpose("meter"), []string{"pid " + pid, "tollgate meter", "embedded JetStream store", "start this process again"},
			"each gateway needs a data directory of its own"},
		{"tollgate gateway", []string{"pid " + pid, "tollgate gateway", "each gateway needs a data directory of its own"}, ""},
	} {
		dir := t.TempDir()
		release, err := lockDataDir(dir, c.purpose)
		if err != nil {
			t.Fatal(err)
		}
		err = startGatewayOn(t, dir)
		if err == nil {
			t.Fatalf("a gateway started on a data directory held by %q", c.purpose)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("held by %q: %v; want it to say %q", c.purpose, err, w)
			}
		}
		if c.not != "" && strings.Contains(err.Error(), c.not) {
			t.Errorf("held by %q: %v; it should not say %q", c.purpose, err, c.not)
		}
		_ = release()
	}
}

// startGatewayOn starts a gateway with the data directory dir (and a NATS
// URL nothing listens on) and returns start's error; one that starts is
// closed at once, and nil returned.
func startGatewayOn(t *testing.T, dir string) error {
	t.Helper()
	e := env{Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0", DataDir: dir, NATSURL: "nats://" + freeAddr(t),
		DatabaseURL: "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", ShutdownGrace: time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := start(ctx, slog.New(slog.DiscardHandler), e, &fileConfig{}, roles{gateway: true})
	if err == nil {
		_ = a.close()
	}
	return err
}
