package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// The self-signed serving pair's files in CERT-DIR, as the real kubelet
// names them.
const (
	selfSignedCert = "kubelet.crt"
	selfSignedKey  = "kubelet.key"
)

// endpoints are the kubelet's HTTP endpoints: /healthz over http on
// healthzBindAddress:healthzPort, and its HTTPS port on the node IP.
type endpoints struct {
	healthzAddr string // "" when not served
	httpsAddr   string // "" when not served (no --node-ip)
	cert        tls.Certificate
	clientCAs   *x509.CertPool // nil: no client certificates are asked for
	anonymous   bool
	logger      *log.Logger
}

// newEndpoints prepares the endpoints. Like the real kubelet's, startup
// fails when the configured serving pair or client CA cannot be read;
// unlike it, a port that is taken is not fatal (simulated kubelets share
// the machine's network).
func newEndpoints(cfg *kubeletv1beta1.KubeletConfiguration, o options, logger *log.Logger) (*endpoints, error) {
	e := &endpoints{anonymous: *cfg.Authentication.Anonymous.Enabled, logger: logger}
	e.healthzAddr = healthzAddress(cfg, o.nodeIPs)
	if f := cfg.Authentication.X509.ClientCAFile; f != "" {
		pool, err := certutil.NewPool(f)
		if err != nil {
			return nil, fmt.Errorf("client CA file: %w", err)
		}
		e.clientCAs = pool
	}
	if len(o.nodeIPs) == 0 {
		return e, nil
	}
	e.httpsAddr = net.JoinHostPort(o.nodeIPs[0].String(), strconv.Itoa(int(cfg.Port)))
	var err error
	if cfg.TLSCertFile != "" || cfg.TLSPrivateKeyFile != "" {
		e.cert, err = tls.LoadX509KeyPair(cfg.TLSCertFile, cfg.TLSPrivateKeyFile)
		if err != nil {
			return nil, fmt.Errorf("serving certificate (tlsCertFile %q, tlsPrivateKeyFile %q): %w", cfg.TLSCertFile, cfg.TLSPrivateKeyFile, err)
		}
		logger.Printf("serving certificate from %s", cfg.TLSCertFile)
	} else if e.cert, err = selfSignedPair(o, logger); err != nil {
		return nil, err
	}
	if leaf, err := x509.ParseCertificate(e.cert.Certificate[0]); err == nil {
		logger.Printf("serving certificate %s valid until %s", leaf.Subject.CommonName, leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return e, nil
}

// healthzAddress is where /healthz is served over http: the configured
// address, except that a loopback or unspecified one becomes the node IP
// when there is one (the simulated kubelets of a machine share its
// loopback).
func healthzAddress(cfg *kubeletv1beta1.KubeletConfiguration, nodeIPs []net.IP) string {
	if cfg.HealthzPort == nil || *cfg.HealthzPort <= 0 {
		return ""
	}
	host := cfg.HealthzBindAddress
	if ip := net.ParseIP(host); len(nodeIPs) > 0 && (ip == nil || ip.IsLoopback() || ip.IsUnspecified()) {
		host = nodeIPs[0].String()
	}
	return net.JoinHostPort(host, strconv.Itoa(int(*cfg.HealthzPort)))
}

// selfSignedPair is the serving pair of a kubelet the config names none
// for: CERT-DIR/kubelet.crt and kubelet.key, made self-signed when missing.
func selfSignedPair(o options, logger *log.Logger) (tls.Certificate, error) {
	certPath, keyPath := filepath.Join(o.certDir, selfSignedCert), filepath.Join(o.certDir, selfSignedKey)
	if ok, _ := certutil.CanReadCertAndKey(certPath, keyPath); !ok {
		certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(o.nodeName, o.nodeIPs, nil)
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("self-signed serving certificate: %w", err)
		}
		if err := certutil.WriteCert(certPath, certPEM); err != nil {
			return tls.Certificate{}, err
		}
		if err := keyutil.WriteKey(keyPath, keyPEM); err != nil {
			return tls.Certificate{}, err
		}
		logger.Printf("generated a self-signed serving certificate %s", certPath)
	}
	pair, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("serving certificate %s: %w", certPath, err)
	}
	return pair, nil
}

// start serves the endpoints until ctx ends. A port it cannot bind is
// logged and left alone.
func (e *endpoints) start(ctx context.Context, static *staticPods) {
	if e.healthzAddr != "" {
		mux := http.NewServeMux()
		mux.HandleFunc("GET /healthz", healthz)
		e.serve(ctx, "healthz", e.healthzAddr, mux, nil)
	}
	if e.httpsAddr != "" {
		mux := http.NewServeMux()
		mux.HandleFunc("GET /healthz", healthz)
		mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", func(w http.ResponseWriter, r *http.Request) {
			containerLogs(w, r, static)
		})
		tc := &tls.Config{Certificates: []tls.Certificate{e.cert}, MinVersion: tls.VersionTLS12}
		if e.clientCAs != nil {
			tc.ClientCAs, tc.ClientAuth = e.clientCAs, tls.VerifyClientCertIfGiven
		}
		e.serve(ctx, "kubelet API (https)", e.httpsAddr, e.authenticate(mux), tc)
	}
}

func (e *endpoints) serve(ctx context.Context, what, addr string, h http.Handler, tc *tls.Config) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		e.logger.Printf("not serving %s: %v", what, err)
		return
	}
	srv := &http.Server{Handler: h, TLSConfig: tc, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: log.New(io.Discard, "", 0)}
	e.logger.Printf("serving %s on %s", what, addr)
	go func() {
		var err error
		if tc != nil {
			err = srv.ServeTLS(ln, "", "")
		} else {
			err = srv.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			e.logger.Printf("%s on %s: %v", what, addr, err)
		}
	}()
	go func() { <-ctx.Done(); _ = srv.Close() }()
}

// authenticate lets through a client with a certificate of the client CA
// (verified in the handshake), or anyone when anonymous requests are
// allowed; others get 401 as from the real kubelet. (Bearer tokens, which
// the real kubelet checks with a TokenReview, are not simulated.)
func (e *endpoints) authenticate(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !e.anonymous && (r.TLS == nil || len(r.TLS.VerifiedChains) == 0) {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func healthz(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }

// containerLogs serves a static pod container's log (by the pod's name or
// its mirror pod's), the last tailLines lines when asked.
func containerLogs(w http.ResponseWriter, r *http.Request, static *staticPods) {
	if static == nil {
		http.NotFound(w, r)
		return
	}
	path, ok := static.logFile(r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container"))
	if !ok {
		http.Error(w, "container not found", http.StatusNotFound)
		return
	}
	f, err := os.Open(path)
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "text/plain")
	tail, err := strconv.Atoi(r.URL.Query().Get("tailLines"))
	if err != nil || tail < 0 {
		_, _ = io.Copy(w, f)
		return
	}
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > tail {
			lines = lines[1:]
		}
	}
	for _, l := range lines {
		_, _ = io.WriteString(w, l+"\n")
	}
}
