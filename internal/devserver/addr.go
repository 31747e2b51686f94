package devserver

import (
	"fmt"
	"net"
	"strconv"

	"kedge.dev/kedge/internal/freeport"
)

// splitAddr parses host:port; "" means 127.0.0.1 and a free port, and an
// empty host or "localhost" means 127.0.0.1 (the services bind one IP).
func splitAddr(addr string) (string, int, error) {
	if addr == "" {
		return "127.0.0.1", 0, nil
	}
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("address %q: %w", addr, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("address %q: bad port", addr)
	}
	if host == "" || host == "localhost" {
		host = "127.0.0.1"
	}
	return host, port, nil
}

// resolvePort returns port, or a free port on host when port is 0. A fixed
// port is checked, so a clash is an error here rather than a fatal exit
// deep inside the server.
func resolvePort(host string, port int) (int, error) {
	if port == 0 {
		ports, err := freeport.Pick(host, 1)
		if err != nil {
			return 0, err
		}
		return ports[0], nil
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return 0, fmt.Errorf("%s is in use (is another kedge dev running?): %w",
			net.JoinHostPort(host, strconv.Itoa(port)), err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
