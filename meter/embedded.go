package meter

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// StartEmbedded starts an in-process NATS server with JetStream, keeping its
// data under dir. listen is "host:port" to accept network clients, or "" for
// in-process clients only (connect with nats.InProcessServer). It returns
// once the server is ready for connections, or an error after 10 seconds.
func StartEmbedded(dir, listen string) (*server.Server, error) {
	opts := &server.Options{
		ServerName: "tollgate-embedded",
		JetStream:  true,
		StoreDir:   dir,
		NoSigs:     true,
		NoLog:      true,
	}
	if listen == "" {
		opts.DontListen = true
	} else {
		host, port, err := net.SplitHostPort(listen)
		if err != nil {
			return nil, fmt.Errorf("embedded nats listen %q: %w", listen, err)
		}
		opts.Host = host
		if opts.Port, err = strconv.Atoi(port); err != nil {
			return nil, fmt.Errorf("embedded nats listen %q: %w", listen, err)
		}
		if opts.Port == 0 {
			opts.Port = server.RANDOM_PORT
		}
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("embedded nats: not ready after 10s")
	}
	return s, nil
}
