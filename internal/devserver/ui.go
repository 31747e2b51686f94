package devserver

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uioptions "github.com/temporalio/ui-server/v2/server/server_options"
)

// startUI serves the Temporal Web UI on s.cfg.UIAddr, talking to the
// frontend (with mutual TLS when the server has it), and returns once it
// answers.
func (s *Server) startUI(ctx context.Context) error {
	host, port, err := splitAddr(s.cfg.UIAddr)
	if err != nil {
		return fmt.Errorf("web UI: %w", err)
	}
	// The UI server exits the process when it cannot listen, so the port
	// is checked (or picked) here first.
	if port, err = resolvePort(host, port); err != nil {
		return fmt.Errorf("web UI: %w", err)
	}
	ui := uiserver.NewServer(uioptions.WithConfigProvider(&uiconfig.Config{
		Host:                host,
		Port:                port,
		TemporalGRPCAddress: s.frontend,
		EnableUI:            true,
		DefaultNamespace:    s.cfg.Namespace,
		DisableNewsFetch:    true,
		HideLogs:            true,
		CORS:                uiconfig.CORS{CookieInsecure: true}, // plain http
		Codec:               uiCodec(s.cfg.CodecEndpoint),
		TLS:                 s.uiTLS(),
	}))
	go func() { _ = ui.Start() }()
	s.ui = ui
	url := "http://" + net.JoinHostPort(host, strconv.Itoa(port))

	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			s.uiURL = url
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("web UI on %s did not start: %w", url, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// uiCodec points the Web UI at Kedge's codec endpoint. The page calls it
// with the browser's cookies (includeCredentials): the endpoint decodes
// only for a browser that logged in at its /login, which a failed decode
// links to.
func uiCodec(endpoint string) uiconfig.Codec {
	if endpoint == "" {
		return uiconfig.Codec{}
	}
	return uiconfig.Codec{
		Endpoint:            endpoint,
		IncludeCredentials:  true,
		DefaultErrorMessage: "Kedge's payloads are decoded for browsers logged in to its codec endpoint: open the link kedge dev printed, or log in here with its codec token.",
		DefaultErrorLink:    strings.TrimRight(endpoint, "/") + "/login",
	}
}

// ResolveUIAddr is the address the Web UI will listen on for addr: its
// host as the UI binds it (127.0.0.1 for "" or localhost) and, for port
// 0, a free port, so that what must know the UI's origin before it starts
// (its codec endpoint) knows it.
func ResolveUIAddr(addr string) (string, error) {
	host, port, err := splitAddr(addr)
	if err != nil {
		return "", fmt.Errorf("web UI: %w", err)
	}
	if port == 0 {
		if port, err = resolvePort(host, 0); err != nil {
			return "", fmt.Errorf("web UI: %w", err)
		}
	}
	return net.JoinHostPort(host, strconv.Itoa(port)), nil
}

// uiTLS is how the Web UI dials a frontend that wants mutual TLS.
func (s *Server) uiTLS() uiconfig.TLS {
	t := s.cfg.TLS
	if t == nil {
		return uiconfig.TLS{}
	}
	return uiconfig.TLS{CaFile: t.CAFile, CertFile: t.CertFile, KeyFile: t.KeyFile, ServerName: t.ServerName, EnableHostVerification: true}
}
