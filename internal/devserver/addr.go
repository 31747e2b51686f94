package devserver

import (
	"fmt"
	"net"
	"strconv"
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
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		if port == 0 {
			return 0, fmt.Errorf("find a free port on %s: %w", host, err)
		}
		return 0, fmt.Errorf("%s is in use (is another kedge dev running?): %w",
			net.JoinHostPort(host, strconv.Itoa(port)), err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// freePorts returns n distinct free ports on host. All listeners stay open
// until all ports are known, so the same port is never handed out twice.
func freePorts(host string, n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, fmt.Errorf("find a free port on %s: %w", host, err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
