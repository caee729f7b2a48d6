package meter

import "testing"

func TestTrimmable(t *testing.T) {
	for v, want := range map[string]bool{
		"2.9.10": false, "2.9.14": false, "2.9.15": true, "2.9.25": true, "2.10.0": true, "2.15.2": true,
		"3.0.0": true, "1.99.99": false, "2.10.0-beta.3": true, "2.9.14-RC.1": false, "": false, "2.10": false, "x.y.z": false,
	} {
		if got := trimmable(v); got != want {
			t.Errorf("trimmable(%q) = %v, want %v", v, got, want)
		}
	}
}

func TestTrimFloor(t *testing.T) {
	for _, c := range []struct {
		ackFloor, delivered, last uint64
		want                      uint64
		refused                   bool
	}{
		{ackFloor: 10, delivered: 12, last: 20, want: 10},
		{ackFloor: 12, delivered: 12, last: 12, want: 12},
		{ackFloor: 13, delivered: 12, last: 20, refused: true}, // past what was delivered
		{ackFloor: 12, delivered: 12, last: 5, refused: true},  // the stream lost its tail
	} {
		got, err := trimFloor(c.ackFloor, c.delivered, c.last)
		if (err != nil) != c.refused || (!c.refused && got != c.want) {
			t.Errorf("trimFloor(%d, %d, %d) = %d, %v; want %d, refused %v", c.ackFloor, c.delivered, c.last, got, err, c.want, c.refused)
		}
	}
}
