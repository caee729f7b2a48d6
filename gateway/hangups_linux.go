package gateway

import (
	"errors"
	"os"
	"sync"
	"syscall"
)

// hangups watches the connections of taken streams (see takeover) for the
// client's hang-up, or the first bytes of its next request, with one epoll
// instance and one goroutine for all of them: a goroutine blocked in a
// read on each would cost a stack a stream. The epoll descriptor is itself
// waited on through Go's netpoller (an os.File), so the goroutine wakes as
// a network read's would, with no thread blocked in epoll_wait. Each
// connection is watched once (EPOLLONESHOT) under an id of its own, so
// that an event reported for a connection already closed, whose
// descriptor a new one took, goes nowhere.
type hangups struct {
	epfd    int
	ep      *os.File // epfd, for the netpoller
	mu      sync.Mutex
	last    uint64 // the last id given
	regs    map[uint64]*takeover
	stopped bool // epfd is closed
	done    chan struct{}
	on      func(t *takeover, hungUp bool) // what an event does (see takeover.watched)
}

// Events a watched connection reports: readable (a request's bytes, or its
// end), the client's half or full close, an error.
const watchEvents = syscall.EPOLLIN | syscall.EPOLLRDHUP | syscall.EPOLLONESHOT

// newHangups starts the poller; each event calls on, on the poller's
// goroutine (on must not block). It returns the epoll error when it cannot
// start.
func newHangups(on func(t *takeover, hungUp bool)) (*hangups, error) {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	if err := syscall.SetNonblock(epfd, true); err != nil {
		syscall.Close(epfd)
		return nil, err
	}
	h := &hangups{epfd: epfd, ep: os.NewFile(uintptr(epfd), "hangups"), regs: map[uint64]*takeover{},
		done: make(chan struct{}), on: on}
	rc, err := h.ep.SyscallConn()
	if err != nil {
		h.ep.Close()
		return nil, err
	}
	go h.run(rc)
	return h, nil
}

// setID and idOf put a watch's id in an event's 64 bits of user data.
func setID(ev *syscall.EpollEvent, id uint64) {
	ev.Fd, ev.Pad = int32(uint32(id)), int32(uint32(id>>32))
}
func idOf(ev *syscall.EpollEvent) uint64 { return uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32 }

// run waits for events, through the netpoller, until the descriptor
// closes (stop).
func (h *hangups) run(rc syscall.RawConn) {
	defer close(h.done)
	events := make([]syscall.EpollEvent, 128)
	for {
		var n int
		var werr error
		err := rc.Read(func(fd uintptr) bool {
			n, werr = syscall.EpollWait(int(fd), events, 0)
			return n != 0 || werr != nil // nothing ready: wait until the descriptor is
		})
		if err != nil || werr != nil && !errors.Is(werr, syscall.EINTR) {
			return // closed
		}
		for i := range events[:max(n, 0)] {
			ev := &events[i]
			h.mu.Lock()
			t := h.regs[idOf(ev)]
			delete(h.regs, idOf(ev))
			h.mu.Unlock()
			if t != nil { // on only records it, and at most cancels a context
				h.on(t, ev.Events&(syscall.EPOLLRDHUP|syscall.EPOLLHUP|syscall.EPOLLERR) != 0)
			}
		}
	}
}

// add watches rc for t, and returns the watch's id; ok is false when it
// cannot (the caller watches some other way).
func (h *hangups) add(t *takeover, rc syscall.RawConn) (id uint64, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return 0, false
	}
	h.last++
	id = h.last
	var err error
	cerr := rc.Control(func(fd uintptr) {
		ev := syscall.EpollEvent{Events: watchEvents}
		setID(&ev, id)
		err = syscall.EpollCtl(h.epfd, syscall.EPOLL_CTL_ADD, int(fd), &ev)
	})
	if cerr != nil || err != nil {
		return 0, false
	}
	h.regs[id] = t
	return id, true
}

// remove ends watch id of rc, before its connection closes or goes back to
// the server; an event already reported for it goes nowhere.
func (h *hangups) remove(id uint64, rc syscall.RawConn) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.regs, id)
	if !h.stopped {
		_ = rc.Control(func(fd uintptr) { _ = syscall.EpollCtl(h.epfd, syscall.EPOLL_CTL_DEL, int(fd), nil) })
	}
}

// stop ends the poller and waits for it. Watches left go nowhere.
func (h *hangups) stop() {
	h.mu.Lock()
	h.stopped = true
	h.ep.Close()
	h.mu.Unlock()
	<-h.done
}
