package starter

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/urfave/cli/v2"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"kedge.dev/kedge/internal/secretfile"
	"kedge.dev/kedge/runs"
	"kedge.dev/kedge/workflows"
)

// Connection flags read the Temporal CLI's environment variables, so a
// shell set up for `temporal` works for kedge too.
func temporalFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "address", Usage: "Temporal frontend `HOST:PORT`", Value: "127.0.0.1:7233", EnvVars: []string{"TEMPORAL_ADDRESS"}},
		&cli.StringFlag{Name: "namespace", Usage: "Temporal namespace", Value: "default", EnvVars: []string{"TEMPORAL_NAMESPACE"}},
		&cli.StringFlag{Name: "task-queue", Usage: "task queue runbooks run on", Value: workflows.DefaultTaskQueue, EnvVars: []string{"KEDGE_TASK_QUEUE"}},
		&cli.StringFlag{Name: "tls-cert-path", Usage: "client certificate `FILE` for mTLS", EnvVars: []string{"TEMPORAL_TLS_CLIENT_CERT_PATH", "TEMPORAL_TLS_CERT"}},
		&cli.StringFlag{Name: "tls-key-path", Usage: "client key `FILE` for mTLS", EnvVars: []string{"TEMPORAL_TLS_CLIENT_KEY_PATH", "TEMPORAL_TLS_KEY"}},
		&cli.StringFlag{Name: "tls-ca-path", Usage: "server CA `FILE`", EnvVars: []string{"TEMPORAL_TLS_SERVER_CA_CERT_PATH", "TEMPORAL_TLS_CA"}},
		&cli.StringFlag{Name: "tls-server-name", Usage: "server name to verify", EnvVars: []string{"TEMPORAL_TLS_SERVER_NAME"}},
		&cli.BoolFlag{Name: "tls", Usage: "use TLS even without client certificates", EnvVars: []string{"TEMPORAL_TLS"}},
		&cli.StringFlag{Name: "api-key", Usage: "API key (Temporal Cloud)", EnvVars: []string{"TEMPORAL_API_KEY"}},
		&cli.DurationFlag{Name: "connect-timeout", Usage: "how long to wait for an unreachable Temporal (restarting, briefly away) before exit 3", Value: 30 * time.Second, EnvVars: []string{"KEDGE_CONNECT_TIMEOUT"}},
		&cli.StringFlag{Name: "ui-url", Usage: "base `URL` of the Temporal Web UI, for links", Value: "http://127.0.0.1:8233", EnvVars: []string{"KEDGE_UI_URL"}},
		codecKeyFlag,
	}
}

// compressionFor is the gRPC compression for a frontend at hostPort:
// none on this machine, the SDK's gzip across a network. Payloads are
// sealed (ciphertext does not compress); on loopback gzip only costs
// CPU at both ends, the server's included (a tenth of the embedded
// server's CPU in a profile of the test world).
func compressionFor(hostPort string) client.GrpcCompression {
	host, _, err := net.SplitHostPort(hostPort)
	if err != nil {
		host = hostPort
	}
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return &client.GrpcCompressionNone{}
	}
	return &client.GrpcCompressionGzip{}
}

func clientOptions(c *cli.Context) (client.Options, error) {
	opts := client.Options{
		HostPort:  c.String("address"),
		Namespace: c.String("namespace"),
		Logger:    quietLogger(),
	}
	opts.ConnectionOptions.GrpcCompression = compressionFor(opts.HostPort)
	cert, key, ca := c.String("tls-cert-path"), c.String("tls-key-path"), c.String("tls-ca-path")
	if cert != "" || key != "" || ca != "" || c.Bool("tls") || c.String("api-key") != "" {
		tc := &tls.Config{ServerName: c.String("tls-server-name"), MinVersion: tls.VersionTLS12}
		if (cert == "") != (key == "") {
			return opts, usageError("--tls-cert-path and --tls-key-path go together")
		}
		if cert != "" {
			pair, err := loadClientPair(cert, key)
			if err != nil {
				return opts, failed("load client certificate: %v", err)
			}
			tc.Certificates = []tls.Certificate{pair}
		}
		if ca != "" {
			pem, err := os.ReadFile(ca)
			if err != nil {
				return opts, failed("read CA: %v", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return opts, failed("no certificates in %s", ca)
			}
			tc.RootCAs = pool
		}
		opts.ConnectionOptions.TLS = tc
	}
	if k := c.String("api-key"); k != "" {
		opts.Credentials = client.NewAPIKeyStaticCredentials(k)
	}
	cd, err := loadCodec(codecKeyPath(c))
	if err != nil {
		return opts, err
	}
	if c.Bool(acceptUnboundFlag.Name) {
		cd = cd.AcceptUnbound()
	}
	cd.Apply(&opts)
	return opts, nil
}

// loadClientPair reads the mutual-TLS client certificate and its key; the
// key is a secret (secretfile: the reader's own, mode 0600 or 0400).
func loadClientPair(certFile, keyFile string) (tls.Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	keyPEM, err := secretfile.Read(keyFile)
	if err != nil {
		return tls.Certificate{}, err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%s and %s: %w", certFile, keyFile, err)
	}
	return pair, nil
}

// dial connects to Temporal, failing fast with exit code 3 when it cannot.
// tune adjusts the client options first (the worker adds its metrics).
func dial(c *cli.Context, tune ...func(*client.Options)) (client.Client, error) {
	opts, err := clientOptions(c)
	if err != nil {
		return nil, err
	}
	for _, t := range tune {
		t(&opts)
	}
	cl, err := dialRetrying(c.Context, opts, c.Duration("connect-timeout"), c.App.ErrWriter)
	if err != nil {
		return nil, cli.Exit(fmt.Sprintf("kedge: cannot reach Temporal at %s (namespace %s): %v\n(start one with `kedge dev`, or set TEMPORAL_ADDRESS)", opts.HostPort, opts.Namespace, err), ExitUnreachable)
	}
	return cl, nil
}

// quietLogger keeps the SDK's chatter off an operator's terminal: warnings
// and errors only.
func quietLogger() sdklog.Logger {
	return sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
}

// opener opens what the CLI reads of its runs' pending activities with
// the codec its client seals with (none when its options do not load:
// attempts are read all the same).
func opener(c *cli.Context) runs.Opener {
	opts, err := clientOptions(c)
	if err != nil {
		return runs.Opener{}
	}
	return runs.Opener{Namespace: opts.Namespace, DataConverter: opts.DataConverter}
}

func workflowURL(c *cli.Context, id, runID string) string {
	return fmt.Sprintf("%s/namespaces/%s/workflows/%s/%s/history", c.String("ui-url"), c.String("namespace"), urlPathEscape(id), runID)
}
