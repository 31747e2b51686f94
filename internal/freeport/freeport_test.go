package freeport

import (
	"net"
	"strconv"
	"testing"
)

func TestPickedPortsAreFreeDistinctAndBelowTheEphemeralRange(t *testing.T) {
	ports, err := Pick("127.0.0.1", 8)
	if err != nil {
		t.Fatal(err)
	}
	low := ephemeralLow()
	seen := map[int]bool{}
	for _, p := range ports {
		if p < floor || p >= low {
			t.Errorf("port %d is outside [%d, %d)", p, floor, low)
		}
		if seen[p] {
			t.Errorf("port %d picked twice", p)
		}
		seen[p] = true
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Errorf("port %d is not free: %v", p, err)
			continue
		}
		l.Close()
	}
}

func TestAPortInUseIsNotPicked(t *testing.T) {
	// Hold every port but a handful in a small window, then pick from it.
	held := map[int]bool{}
	for range 50 {
		ports, err := Pick("127.0.0.1", 1)
		if err != nil {
			t.Fatal(err)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		held[ports[0]] = true
	}
	ports, err := Pick("127.0.0.1", 20)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ports {
		if held[p] {
			t.Errorf("port %d is held open and was picked", p)
		}
	}
}
