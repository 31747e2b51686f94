package devserver

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
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
		Codec:               uiconfig.Codec{Endpoint: s.cfg.CodecEndpoint},
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

// uiTLS is how the Web UI dials a frontend that wants mutual TLS.
func (s *Server) uiTLS() uiconfig.TLS {
	t := s.cfg.TLS
	if t == nil {
		return uiconfig.TLS{}
	}
	return uiconfig.TLS{CaFile: t.CAFile, CertFile: t.CertFile, KeyFile: t.KeyFile, ServerName: t.ServerName, EnableHostVerification: true}
}
