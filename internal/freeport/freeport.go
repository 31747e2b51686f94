package freeport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// floor is the lowest port picked: below it live the well-known and
// registered services a machine may run.
const floor = 15000

// rangeFile holds the kernel's ephemeral port range ("low high").
const rangeFile = "/proc/sys/net/ipv4/ip_local_port_range"

// Pick returns n distinct ports on host that are free now and outside the
// ephemeral range. Every port is held open until all are chosen, so none is
// handed out twice. When the ephemeral range leaves no room below it, the
// kernel's own choice is taken.
func Pick(host string, n int) ([]int, error) {
	ceiling := ephemeralLow()
	if ceiling-floor < 1000 {
		return kernelPorts(host, n)
	}
	ports := make([]int, 0, n)
	start := floor + rand.IntN(ceiling-floor)
	for i := 0; i < ceiling-floor && len(ports) < n; i++ {
		port := floor + (start-floor+i)%(ceiling-floor)
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			continue
		}
		defer l.Close()
		ports = append(ports, port)
	}
	if len(ports) < n {
		return nil, fmt.Errorf("find %d free ports on %s between %d and %d: only %d", n, host, floor, ceiling, len(ports))
	}
	return ports, nil
}

// ephemeralLow is the first port of the ephemeral range (Linux's default
// when the file cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile(rangeFile)
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 32768
	}
	low, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return low
}

// kernelPorts are n ports the kernel chose, held open until all are known.
func kernelPorts(host string, n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, errors.Join(fmt.Errorf("find a free port on %s", host), err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
