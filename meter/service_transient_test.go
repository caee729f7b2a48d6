package meter_test

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
)

// TestServiceWaitsOutATransientAPIError: every JetStream API error was
// taken for a refusal of the stream as configured, logged at ERROR and
// reported as such in /readyz, even "JetStream system temporarily
// unavailable" (10008), which a cluster without a meta leader answers
// until it elects one. The service waits it out as it does NATS out of
// reach. A server configured for a cluster of three whose peers never
// come answers it (once its meta group has been leaderless for 10 s).
func TestServiceWaitsOutATransientAPIError(t *testing.T) {
	t.Parallel() // waits most of its time: see the Makefile's test target
	ports := make([]int, 3)
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
	}
	s, err := server.NewServer(&server.Options{
		ServerName: "alone", Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: t.TempDir(),
		NoSigs: true, NoLog: true,
		Cluster: server.ClusterOpts{Name: "tollgate-test", Host: "127.0.0.1", Port: ports[0]},
		Routes: server.RoutesFromStr(fmt.Sprintf("nats-route://127.0.0.1:%d,nats-route://127.0.0.1:%d,nats-route://127.0.0.1:%d",
			ports[0], ports[1], ports[2])),
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}

	logs := &metertest.LockedBuffer{}
	svc := meter.NewService(js, ledgertest.NewStore(t), meter.WorkerConfig{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	svc.Start()
	defer stopService(t, svc)
	var st meter.ServiceStatus
	for deadline := time.Now().Add(40 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if st = svc.Status(); st.Err != nil && strings.Contains(st.Err.Error(), "temporarily unavailable") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no meta leader: status %+v, want JetStream's \"temporarily unavailable\"", st)
		}
	}
	var api *jetstream.APIError
	if !errors.As(st.Err, &api) || api.ErrorCode != 10008 {
		t.Fatalf("status error %v; want JetStream's API error 10008", st.Err)
	}
	if st.Refused {
		t.Errorf("JetStream temporarily unavailable is reported as a refusal: %+v", st)
	}
	if out := logs.String(); strings.Contains(out, `"level":"ERROR"`) || !strings.Contains(out, "waiting for NATS") {
		t.Errorf("JetStream temporarily unavailable is not logged as a wait at WARN:\n%s", out)
	}
}
