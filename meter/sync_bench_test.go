package meter_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/meter"
)

// BenchmarkPublishSync is what JetStream's sync policy costs the gateway:
// the time to a PubAck of one usage event on the embedded server (file
// storage in the test's temporary directory, on this machine's disk), one
// publisher at a time ("serial": the latency a request's end waits) and 64
// at once ("parallel": ns/op is then the server's throughput per event).
func BenchmarkPublishSync(b *testing.B) {
	for _, policy := range []string{"always", "100ms", "1s", "2m0s"} {
		sync, err := meter.ParseSyncPolicy(policy)
		if err != nil {
			b.Fatal(err)
		}
		for _, mode := range []string{"serial", "parallel"} {
			b.Run(policy+"/"+mode, func(b *testing.B) {
				s, err := meter.StartEmbedded(b.TempDir(), "127.0.0.1:0", sync, nil)
				if err != nil {
					b.Fatal(err)
				}
				defer s.Shutdown()
				nc, err := nats.Connect(s.ClientURL())
				if err != nil {
					b.Fatal(err)
				}
				defer nc.Close()
				js, _ := jetstream.New(nc)
				ctx := context.Background()
				if _, err := meter.EnsureStream(ctx, js, meter.StreamConfig{}); err != nil {
					b.Fatal(err)
				}
				pub := meter.NewPublisher(js, meter.StreamConfig{}, 10*time.Second)
				if mode == "serial" {
					for i := 0; b.Loop(); i++ {
						if err := pub.Publish(ctx, testEvent(i)); err != nil {
							b.Fatal(err)
						}
					}
					return
				}
				b.SetParallelism(32) // 64 publishers on 2 cores
				b.RunParallel(func(pb *testing.PB) {
					for i := 0; pb.Next(); i++ {
						if err := pub.Publish(ctx, testEvent(i)); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}
