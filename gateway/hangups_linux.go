package gateway

import (
	"errors"
	"sync"
	"syscall"
)

// hangups watches the connections of taken streams (see takeover) for the
// client's hang-up, or the first bytes of its next request, with one epoll
// instance and one goroutine for all of them: a goroutine blocked in a
// read on each would cost a stack a stream. Each connection is watched
// once (EPOLLONESHOT) under an id of its own, so that an event reported
// for a connection already closed, whose descriptor a new one took, goes
// nowhere.
type hangups struct {
	epfd    int
	wake    [2]int // a pipe: writing to it ends run
	mu      sync.Mutex
	last    uint64 // the last id given
	regs    map[uint64]*takeover
	stopped bool // the descriptors are closed
	done    chan struct{}
	on      func(t *takeover, hungUp bool) // what an event does (see takeover.watched)
}

// Events a watched connection reports: readable (a request's bytes, or its
// end), the client's half or full close, an error.
const watchEvents = syscall.EPOLLIN | syscall.EPOLLRDHUP | syscall.EPOLLONESHOT

// newHangups starts the poller; each event calls on, on a goroutine of its
// own. It returns the epoll or pipe error when it cannot start.
func newHangups(on func(t *takeover, hungUp bool)) (*hangups, error) {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	h := &hangups{epfd: epfd, regs: map[uint64]*takeover{}, done: make(chan struct{}), on: on}
	if err := syscall.Pipe2(h.wake[:], syscall.O_CLOEXEC|syscall.O_NONBLOCK); err != nil {
		syscall.Close(epfd)
		return nil, err
	}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN} // id 0: the pipe
	if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, h.wake[0], &ev); err != nil {
		h.closeFDs()
		return nil, err
	}
	go h.run()
	return h, nil
}

func (h *hangups) closeFDs() {
	syscall.Close(h.wake[0])
	syscall.Close(h.wake[1])
	syscall.Close(h.epfd)
}

// setID and idOf put a watch's id in an event's 64 bits of user data.
func setID(ev *syscall.EpollEvent, id uint64) {
	ev.Fd, ev.Pad = int32(uint32(id)), int32(uint32(id>>32))
}
func idOf(ev *syscall.EpollEvent) uint64 { return uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32 }

func (h *hangups) run() {
	defer close(h.done)
	events := make([]syscall.EpollEvent, 128)
	for {
		n, err := syscall.EpollWait(h.epfd, events, -1)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return
		}
		for i := range events[:n] {
			ev := &events[i]
			id := idOf(ev)
			if id == 0 {
				return // stop
			}
			h.mu.Lock()
			t := h.regs[id]
			delete(h.regs, id)
			h.mu.Unlock()
			if t != nil {
				hungUp := ev.Events&(syscall.EPOLLRDHUP|syscall.EPOLLHUP|syscall.EPOLLERR) != 0
				go h.on(t, hungUp)
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
	_, _ = syscall.Write(h.wake[1], []byte{0})
	<-h.done
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopped = true
	h.closeFDs()
}
