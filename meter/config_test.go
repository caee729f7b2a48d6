package meter_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter"
)

// TestConfigBatchDefaults: an empty meter section takes batches of 6000 and
// 24000 pending acks; a config that set max_ack_pending below 6000 (valid
// while the default batch was 2000) still starts, its batch taken down to
// it; a batch set above max_ack_pending is refused.
func TestConfigBatchDefaults(t *testing.T) {
	var c meter.Config
	if err := c.Validate(); err != nil || c.BatchSize != 6000 || c.MaxAckPending != 24000 {
		t.Fatalf("defaults: batch %d, max_ack_pending %d, %v", c.BatchSize, c.MaxAckPending, err)
	}
	c = meter.Config{MaxAckPending: 5000}
	if err := c.Validate(); err != nil || c.BatchSize != 5000 {
		t.Fatalf("max_ack_pending 5000 alone: batch %d, %v; want 5000 and no error", c.BatchSize, err)
	}
	c = meter.Config{MaxAckPending: 5000, BatchSize: 6000}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "max_ack_pending (5000) must be at least meter.batch_size (6000)") {
		t.Fatalf("batch above max_ack_pending: %v", err)
	}
}

// TestConfigBatchWaitUnderTheAckWait: a batch still filling is not kept from
// redelivery, so a batch_wait near the ack_wait had every event delivered
// again, on towards max_deliver, before its batch was written.
func TestConfigBatchWaitUnderTheAckWait(t *testing.T) {
	for _, c := range []struct {
		cfg  meter.Config
		want string
	}{
		{meter.Config{AckWait: 3 * time.Second, BatchWait: 2 * time.Second}, "meter.batch_wait (2s) must be at most a third of meter.ack_wait (3s)"},
		{meter.Config{AckWait: 500 * time.Millisecond}, "meter.ack_wait must be at least 1s"},
		{meter.Config{SpoolMaxAge: -time.Second}, "meter.spool_max_age must be 0 (none) or more, not -1s"},
		{meter.Config{AckWait: 3 * time.Second, BatchWait: time.Second}, ""},
	} {
		err := c.cfg.Validate()
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%+v: %v; want %q", c.cfg, err, c.want)
		}
	}
}

// TestConfigCheckEmbedded: the embedded JetStream server is a single node,
// which refuses a usage stream of more than one replica (serve then metered
// nothing, a crash review): such a configuration is named, with what to do.
func TestConfigCheckEmbedded(t *testing.T) {
	for _, replicas := range []int{0, 1, 3, 5} {
		c := meter.Config{Replicas: replicas}
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		err := c.CheckEmbedded()
		if replicas <= 1 && err != nil {
			t.Errorf("replicas %d on the embedded server: %v; want no error", replicas, err)
		}
		if replicas > 1 && (err == nil || !strings.Contains(err.Error(), fmt.Sprintf("meter.replicas is %d, but the embedded JetStream server", replicas)) ||
			!strings.Contains(err.Error(), "single node") || !strings.Contains(err.Error(), "set meter.replicas to 1")) {
			t.Errorf("replicas %d on the embedded server: %v; want it refused, saying why and what to do", replicas, err)
		}
	}
}

// TestConfigRefusesEveryNegativeSetting: a negative count, size or
// duration in the meter: section is a mistake, and Validate names it (with
// its setting as the file spells it) rather than take it for the default,
// as docs/configuration.md says of every setting: meter.publish_timeout: -1s
// was taken for 2s without a word.
func TestConfigRefusesEveryNegativeSetting(t *testing.T) {
	typ := reflect.TypeOf(meter.Config{})
	n := 0
	for i := range typ.NumField() {
		f := typ.Field(i)
		name := "meter." + strings.Split(f.Tag.Get("yaml"), ",")[0]
		var c meter.Config
		v := reflect.ValueOf(&c).Elem().Field(i)
		switch v.Kind() {
		case reflect.Int, reflect.Int64:
			if f.Type == reflect.TypeOf(time.Duration(0)) {
				v.SetInt(int64(-time.Second))
			} else {
				v.SetInt(-1)
			}
		default:
			continue
		}
		n++
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s below 0: Validate says %v; want an error naming %s", name, err, name)
		}
	}
	if n < 10 {
		t.Fatalf("checked %d settings; want every count, size and duration of meter.Config", n)
	}
}
