package meter

import "time"

// spoolAges times a spool's unpublished events, which are published in
// the order they were appended: one mark per second or more of appends
// (an outage of a day holds 86,400 marks at most, 32 bytes each), so
// that the age of the oldest event left is known to the second however
// much of a backlog has been published. Its zero value is empty. The
// spool's mutex guards it.
type spoolAges struct {
	marks []spoolMark // oldest first; marks[head] is the oldest event's
	head  int
	// in and out count the events appended and published since the
	// spool was opened (those found at open as appended then).
	in, out int64
}

// spoolMark is the time of the appends from the in-th on, up to the next
// mark's.
type spoolMark struct {
	in int64
	at time.Time
}

// appended times n events appended at now.
func (a *spoolAges) appended(n int64, now time.Time) {
	if n <= 0 {
		return
	}
	if len(a.marks) == 0 || now.Sub(a.marks[len(a.marks)-1].at) >= time.Second {
		a.marks = append(a.marks, spoolMark{in: a.in, at: now})
	}
	a.in += n
}

// published forgets the n oldest events: they were published.
func (a *spoolAges) published(n int64) {
	a.out += n
	if a.out >= a.in {
		a.marks, a.head, a.in, a.out = a.marks[:0], 0, 0, 0
		return
	}
	for a.head+1 < len(a.marks) && a.marks[a.head+1].in <= a.out {
		a.head++
	}
	if a.head >= 64 && 2*a.head >= len(a.marks) { // the marks passed are half or more: dropped
		a.marks = append(a.marks[:0], a.marks[a.head:]...)
		a.head = 0
	}
}

// oldest is when the oldest event left was appended (to within a second
// before it); the zero time when none is left.
func (a *spoolAges) oldest() time.Time {
	if a.head >= len(a.marks) {
		return time.Time{}
	}
	return a.marks[a.head].at
}
