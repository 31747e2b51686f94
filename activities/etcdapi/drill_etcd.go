package etcdapi

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.etcd.io/etcd/server/v3/embed"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"kedge.dev/kedge/internal/freeport"

	"kedge.dev/kedge/actions/errtype"
)

// drillStart bounds how long the restored etcd may take to start and
// answer (a variable for tests).
var drillStart = 2 * time.Minute

// drillMember is the restored etcd's one member.
const drillMember = "kedge-drill"

// restored is what the restored etcd answered.
type restored struct {
	revision int64
	keys     int64
	found    map[string]bool
}

// drillRestore restores the snapshot file into dir/data with etcd's own
// code (etcdutl: its sha256 checked again, a new cluster of one member),
// removes the file, starts that member with etcd's embed package on
// loopback (random free ports, client and peer TLS from a CA made for the
// drill, client certificates required) and asks it its revision, its key
// count and the expected keys, at that revision. It stops the member
// before it returns. A variable so tests can see whether it ran.
var drillRestore = func(ctx context.Context, dir, snapshotPath string, expect []string) (restored, error) {
	creds, err := drillTLS(filepath.Join(dir, "tls"))
	if err != nil {
		return restored{}, temporal.NewApplicationErrorWithCause(fmt.Sprintf("the drill's TLS: %v", err), errtype.EtcdDrillFailed, err)
	}
	ports, err := freePorts(2)
	if err != nil {
		return restored{}, temporal.NewApplicationErrorWithCause(fmt.Sprintf("free ports on loopback: %v", err), errtype.EtcdDrillFailed, err)
	}
	clientURL, peerURL := "https://127.0.0.1:"+ports[0], "https://127.0.0.1:"+ports[1]
	token := make([]byte, 8)
	_, _ = rand.Read(token)
	cluster, data := drillMember+"="+peerURL, filepath.Join(dir, "data")
	lg := zap.NewNop()
	if err := snapshot.NewV3(lg).Restore(snapshot.RestoreConfig{SnapshotPath: snapshotPath, Name: drillMember, OutputDataDir: data,
		PeerURLs: []string{peerURL}, InitialCluster: cluster, InitialClusterToken: "kedge-drill-" + hex.EncodeToString(token)}); err != nil {
		return restored{}, temporal.NewApplicationErrorWithCause(fmt.Sprintf("etcd's restore of the snapshot: %v", err), errtype.EtcdDrillFailed, err)
	}
	_ = os.Remove(snapshotPath) // restored: its copy is in the data directory
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir, cfg.InitialCluster = drillMember, data, cluster
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(lg)
	cfg.UnsafeNoFsync = true // thrown away afterwards
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = urls(clientURL), urls(clientURL)
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = urls(peerURL), urls(peerURL)
	cfg.ClientTLSInfo, cfg.PeerTLSInfo = creds.server, creds.server
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return restored{}, temporal.NewApplicationErrorWithCause(fmt.Sprintf("start the restored etcd: %v", err), errtype.EtcdDrillFailed, err)
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		return restored{}, temporal.NewApplicationErrorWithCause(fmt.Sprintf("the restored etcd stopped: %v", err), errtype.EtcdDrillFailed, err)
	case <-time.After(drillStart):
		return restored{}, temporal.NewApplicationError(fmt.Sprintf("the restored etcd did not become ready within %s", drillStart), errtype.EtcdDrillFailed, nil)
	case <-ctx.Done():
		return restored{}, ctx.Err()
	}
	return askRestored(ctx, clientURL, creds.client, expect)
}

// urls is one URL made here (from a port number): it parses.
func urls(raw string) []url.URL {
	u, _ := url.Parse(raw)
	return []url.URL{*u}
}

// askRestored asks the restored etcd, as a client, its revision, then
// at that revision its key count and each expected key.
func askRestored(ctx context.Context, endpoint string, tlsConf *tls.Config, expect []string) (restored, error) {
	cl, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, TLS: tlsConf, DialTimeout: 10 * time.Second, Logger: zap.NewNop(), Context: ctx})
	if err != nil {
		return restored{}, temporal.NewApplicationErrorWithCause(fmt.Sprintf("reach the restored etcd: %v", err), errtype.EtcdDrillFailed, err)
	}
	defer cl.Close()
	ask := func(what string, err error) error {
		return temporal.NewApplicationErrorWithCause(fmt.Sprintf("the restored etcd did not answer %s: %v", what, err), errtype.EtcdDrillFailed, err)
	}
	ctx, cancel := context.WithTimeout(ctx, drillStart)
	defer cancel()
	st, err := cl.Status(ctx, endpoint)
	if err != nil {
		return restored{}, ask("its status", err)
	}
	r := restored{revision: st.Header.Revision, found: map[string]bool{}}
	all, err := cl.Get(ctx, "", clientv3.WithFromKey(), clientv3.WithCountOnly(), clientv3.WithRev(r.revision))
	if err != nil {
		return r, ask("its key count", err)
	}
	r.keys = all.Count
	for _, k := range expect {
		got, err := cl.Get(ctx, k, clientv3.WithCountOnly(), clientv3.WithRev(r.revision))
		if err != nil {
			return r, ask(fmt.Sprintf("for %q", k), err)
		}
		r.found[k] = got.Count > 0
	}
	return r, nil
}

// drillCreds are the restored etcd's TLS: its certificate, key and CA as
// files for etcd, and the client's configuration.
type drillCreds struct {
	server transport.TLSInfo
	client *tls.Config
}

// drillTLS makes a CA for one drill, valid for an hour, and one
// certificate from it for 127.0.0.1 that etcd serves and the drill's
// client presents (etcd's member presents its own to its gateway).
// The files are 0600 in dir (0700).
func drillTLS(dir string) (drillCreds, error) {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return drillCreds{}, err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return drillCreds{}, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kedge etcd restore drill CA"},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return drillCreds{}, err
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return drillCreds{}, err
	}
	leafTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: drillMember},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return drillCreds{}, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return drillCreds{}, err
	}
	files := map[string][]byte{
		"ca.crt":   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		"etcd.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}),
		"etcd.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return drillCreds{}, err
		}
	}
	pair, err := tls.X509KeyPair(files["etcd.crt"], files["etcd.key"])
	if err != nil {
		return drillCreds{}, err
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	return drillCreds{
		server: transport.TLSInfo{CertFile: filepath.Join(dir, "etcd.crt"), KeyFile: filepath.Join(dir, "etcd.key"),
			TrustedCAFile: filepath.Join(dir, "ca.crt"), ClientCertAuth: true},
		client: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12},
	}, nil
}

// freePorts are n ports on loopback free a moment ago, outside the
// ephemeral range (freeport). One taken before etcd listens fails the
// attempt, which is retried.
func freePorts(n int) ([]string, error) {
	ports, err := freeport.Pick("127.0.0.1", n)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(ports))
	for i, p := range ports {
		out[i] = strconv.Itoa(p)
	}
	return out, nil
}
