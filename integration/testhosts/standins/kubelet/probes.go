package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Probe defaults, the API's.
const (
	defaultProbePeriod    = 10 * time.Second
	defaultProbeTimeout   = time.Second
	defaultProbeThreshold = 3
)

// probes runs one container's startup, liveness and readiness probes as
// the kubelet's prober does: each kind on its own period; liveness and
// readiness only once the startup probe has passed (or there is none) and
// initialDelaySeconds after the container started; failureThreshold
// consecutive failures of the startup or liveness probe ask for the
// container to be killed (the pod's restartPolicy then restarts it);
// readiness counts until it passes and again after failureThreshold
// failures. httpGet and tcpSocket probes are run; exec and grpc probes are
// not simulated and count as passing (logged when the container starts).
type probes struct {
	cancel context.CancelFunc
	done   sync.WaitGroup

	mu      sync.Mutex
	started bool
	ready   bool
	kill    string // why the container must be killed ("" while it need not)
}

// probeTarget is where a container's probes go.
type probeTarget struct {
	pod       string // NS/NAME, for the log
	container corev1.Container
	podIP     string
	startedAt time.Time
	logger    *log.Logger
}

// startProbes starts the probes of a container that has just started (or
// was adopted; then, as after a kubelet restart, every probe starts
// afresh).
func startProbes(t probeTarget) *probes {
	ctx, cancel := context.WithCancel(context.Background())
	p := &probes{cancel: cancel}
	c := t.container
	p.started = c.StartupProbe == nil
	p.ready = c.ReadinessProbe == nil && p.started
	for kind, spec := range map[string]*corev1.Probe{"startup": c.StartupProbe, "liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		if spec == nil {
			continue
		}
		if spec.HTTPGet == nil && spec.TCPSocket == nil {
			t.logger.Printf("static pod %s: container %s: its %s probe (exec or grpc) is not simulated: it counts as passing", t.pod, c.Name, kind)
		}
		p.done.Add(1)
		go func() {
			defer p.done.Done()
			p.work(ctx, kind, spec, t)
		}()
	}
	return p
}

// stop ends the probes (the container stopped).
func (p *probes) stop() {
	if p == nil {
		return
	}
	p.cancel()
	p.done.Wait()
}

// state is what the probes say of the container: started (the startup
// probe passed), ready, and why it must be killed.
func (p *probes) state() (started, ready bool, kill string) {
	if p == nil {
		return true, true, ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.started, p.ready, p.kill
}

// work runs one kind of probe until ctx ends or the probe asks for a kill.
func (p *probes) work(ctx context.Context, kind string, spec *corev1.Probe, t probeTarget) {
	period := seconds(spec.PeriodSeconds, defaultProbePeriod)
	failures, successes := 0, 0
	threshold := int(spec.FailureThreshold)
	if threshold <= 0 {
		threshold = defaultProbeThreshold
	}
	needed := max(int(spec.SuccessThreshold), 1)
	tick := time.NewTicker(period)
	defer tick.Stop()
	for first := true; ; first = false {
		if !first {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
		p.mu.Lock()
		started := p.started
		p.mu.Unlock()
		if kind != "startup" && !started {
			continue
		}
		if time.Since(t.startedAt) < time.Duration(spec.InitialDelaySeconds)*time.Second {
			continue
		}
		err := runProbe(ctx, spec, t)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			failures, successes = 0, successes+1
		} else {
			failures, successes = failures+1, 0
		}
		p.mu.Lock()
		switch {
		case kind == "readiness" && successes >= needed:
			p.ready = true
		case kind == "readiness" && failures >= threshold:
			p.ready = false
		case kind == "startup" && successes >= needed:
			p.started = true
			p.ready = t.container.ReadinessProbe == nil
		case failures >= threshold:
			p.kill = fmt.Sprintf("failed %s probe (%d in a row, last: %v)", kind, failures, err)
		}
		done := p.kill != "" || (kind == "startup" && p.started)
		p.mu.Unlock()
		if err != nil && failures <= threshold {
			t.logger.Printf("static pod %s: container %s: %s probe failed (%d of %d): %v", t.pod, t.container.Name, kind, failures, threshold, err)
		}
		if done {
			return
		}
	}
}

// runProbe probes once, within the probe's timeout.
func runProbe(ctx context.Context, spec *corev1.Probe, t probeTarget) error {
	timeout := seconds(spec.TimeoutSeconds, defaultProbeTimeout)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch {
	case spec.HTTPGet != nil:
		return httpProbe(ctx, spec.HTTPGet, t)
	case spec.TCPSocket != nil:
		port, err := probePort(spec.TCPSocket.Port, t.container)
		if err != nil {
			return err
		}
		host := spec.TCPSocket.Host
		if host == "" {
			host = t.podIP
		}
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return err
		}
		return conn.Close()
	}
	return nil // exec and grpc: not simulated
}

// httpProbe is the kubelet's HTTP GET probe: the pod's IP unless the probe
// names a host, a certificate never verified, success on 200-399.
func httpProbe(ctx context.Context, h *corev1.HTTPGetAction, t probeTarget) error {
	port, err := probePort(h.Port, t.container)
	if err != nil {
		return err
	}
	host := h.Host
	if host == "" {
		host = t.podIP
	}
	scheme := "http"
	if h.Scheme == corev1.URISchemeHTTPS {
		scheme = "https"
	}
	u := &url.URL{Scheme: scheme, Host: net.JoinHostPort(host, strconv.Itoa(port))}
	if ref, err := url.Parse(h.Path); err == nil {
		u = u.ResolveReference(ref)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", "kube-probe/1.35")
	req.Header.Set("Accept", "*/*")
	for _, hd := range h.HTTPHeaders {
		req.Header.Set(hd.Name, hd.Value)
	}
	client := &http.Client{
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true}, // as the kubelet's prober
		// A redirect is a success, as the kubelet counts one to another host.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("HTTP probe failed with statuscode: %d", resp.StatusCode)
	}
	return nil
}

// probePort resolves a probe's port, a number or a container port's name.
func probePort(p intstr.IntOrString, c corev1.Container) (int, error) {
	if p.Type == intstr.Int {
		if p.IntVal <= 0 || p.IntVal > 65535 {
			return 0, fmt.Errorf("invalid port number: %d", p.IntVal)
		}
		return int(p.IntVal), nil
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	if n, err := strconv.Atoi(p.StrVal); err == nil && n > 0 && n <= 65535 {
		return n, nil
	}
	return 0, fmt.Errorf("couldn't find port: %s in container %s", p.StrVal, c.Name)
}

func seconds(n int32, def time.Duration) time.Duration {
	if n <= 0 {
		return def
	}
	return time.Duration(n) * time.Second
}
