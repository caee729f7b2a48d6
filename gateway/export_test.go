package gateway

// TakenStreams is how many streams of s took their connections from
// net/http (see takeover).
func TakenStreams(s *Server) int64 { return s.taken.Load() }
