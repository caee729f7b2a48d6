package gateway

// TakenStreams is how many streams of s took their connections from
// net/http (see takeover).
func TakenStreams(s *Server) int64 { return s.taken.Load() }

// PolledStreams is how many of them the hangups poller watched.
func PolledStreams(s *Server) int64 { return s.polled.Load() }

// PollHangups sets whether servers started from now on watch taken
// connections with the poller, and returns the setting before.
func PollHangups(on bool) bool {
	was := pollHangups
	pollHangups = on
	return was
}

// TakeAfter is how long a stream runs before its connection is taken.
const TakeAfter = takeAfter

// IdleHandedBack is how many connections streams gave back are on the
// handback's idle list.
func IdleHandedBack(s *Server) int {
	s.handback.mu.Lock()
	defer s.handback.mu.Unlock()
	return len(s.handback.idle)
}

// ClientConnections is how many client connections s's listener holds
// open: accepted and not yet closed by the gateway.
func ClientConnections(s *Server) int {
	s.clients.mu.Lock()
	defer s.clients.mu.Unlock()
	return len(s.clients.conns)
}

// MaxHeadWait is how long a native stream's events before output are held.
const MaxHeadWait = maxHeadWait
