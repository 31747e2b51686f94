package mtls

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"kedge.dev/kedge/internal/pubkey"
	"kedge.dev/kedge/internal/secretfile"
)

// Options say what to make.
type Options struct {
	Dir string
	// ServerName is the frontend's name as clients dial it (a SAN of the
	// server certificate, with localhost and the loopback addresses).
	ServerName string
	// Hosts are more names or IP addresses of the server.
	Hosts []string
	// Clients name the client certificates, one file pair each: NAME
	// (its CN) for a default client, which has its role (DefaultRole),
	// or NAME:ROLE.
	Clients []string
	// TaskQueues are the queues the worker certificates made by this run
	// may poll.
	TaskQueues []string
	// SiteQueues are the queues the site certificates (role site) made
	// by this run may poll for activity tasks.
	SiteQueues []string
	// Valid is the life of the server and client certificates (the CA's
	// is ten years).
	Valid time.Duration
	Now   time.Time
}

// File is one file of the set and whether this run wrote it.
type File struct {
	Path    string `json:"path"`
	Written bool   `json:"written"`
	// Role is a certificate's (the server's is system); TaskQueues a
	// worker certificate's.
	Role       Role     `json:"role,omitempty"`
	TaskQueues []string `json:"taskQueues,omitempty"`
}

// Result lists the files of the set.
type Result struct {
	CA       string    `json:"ca"`
	Files    []File    `json:"files"`
	NotAfter time.Time `json:"notAfter"`
}

var nameRe = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// Generate writes what is missing under o.Dir: ca.pem and ca.key,
// server.pem and server.key, NAME.pem and NAME.key for each client. Keys
// are ECDSA P-256, written 0600. Each certificate carries its role (the
// subject's OU; the server's is system), a worker's also the task queues
// it may poll (URI SANs); a pair kept from an earlier run must have the
// role asked for.
func Generate(o Options) (Result, error) {
	if o.Dir == "" {
		return Result{}, errors.New("no directory")
	}
	if o.ServerName == "" {
		return Result{}, errors.New("no server name")
	}
	if o.Valid <= 0 {
		o.Valid = 365 * 24 * time.Hour
	}
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	type client struct {
		name string
		role Role
	}
	var clients []client
	for _, c := range o.Clients {
		name, role, err := parseClient(c)
		if err != nil {
			return Result{}, err
		}
		clients = append(clients, client{name, role})
	}
	queues, err := taskQueueURIs(o.TaskQueues)
	if err != nil {
		return Result{}, err
	}
	siteQueues, err := taskQueueURIs(o.SiteQueues)
	if err != nil {
		return Result{}, err
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return Result{}, err
	}
	res := Result{CA: filepath.Join(o.Dir, "ca.pem"), NotAfter: o.Now.Add(o.Valid)}
	ca, caKey, wrote, err := loadOrMakeCA(o)
	if err != nil {
		return Result{}, err
	}
	res.Files = append(res.Files, File{Path: res.CA, Written: wrote}, File{Path: filepath.Join(o.Dir, "ca.key"), Written: wrote})

	dns := []string{o.ServerName, "localhost"}
	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	for _, h := range o.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			ips = append(ips, ip)
		} else {
			dns = append(dns, h)
		}
	}
	type leaf struct {
		name string
		role Role
		tmpl x509.Certificate
	}
	leaves := []leaf{{"server", RoleSystem, x509.Certificate{
		Subject:  pkix.Name{CommonName: o.ServerName, Organization: []string{"kedge"}, OrganizationalUnit: []string{string(RoleSystem)}},
		DNSNames: dns, IPAddresses: ips,
		// The frontend's certificate also authenticates its services to
		// one another (internode), as a client.
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}}}
	for _, c := range clients {
		l := leaf{c.name, c.role, x509.Certificate{
			Subject:     pkix.Name{CommonName: c.name, Organization: []string{"kedge"}, OrganizationalUnit: []string{string(c.role)}},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}}
		switch c.role {
		case RoleWorker:
			if len(queues) == 0 {
				return Result{}, fmt.Errorf("client %s: a worker's certificate needs the task queues it polls", c.name)
			}
			l.tmpl.URIs = queues
		case RoleSite:
			if len(siteQueues) == 0 {
				return Result{}, fmt.Errorf("client %s: a site's certificate needs the task queues whose activities it runs (--site-queue)", c.name)
			}
			l.tmpl.URIs = siteQueues
		}
		leaves = append(leaves, l)
	}
	for _, l := range leaves {
		cert, key := filepath.Join(o.Dir, l.name+".pem"), filepath.Join(o.Dir, l.name+".key")
		if exists(cert) && exists(key) {
			id, err := existingIdentity(cert, key, l.role)
			if err != nil {
				return Result{}, err
			}
			res.Files = append(res.Files, File{Path: cert, Role: id.Role, TaskQueues: id.TaskQueues}, File{Path: key})
			continue
		}
		if exists(cert) || exists(key) {
			return Result{}, fmt.Errorf("%s or %s exists without the other: remove it to make a new pair", cert, key)
		}
		tmpl := l.tmpl
		tmpl.NotBefore, tmpl.NotAfter = o.Now.Add(-5*time.Minute), o.Now.Add(o.Valid)
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		if err := issue(&tmpl, ca, caKey, cert, key); err != nil {
			return Result{}, err
		}
		var q []string
		switch l.role {
		case RoleWorker:
			q = o.TaskQueues
		case RoleSite:
			q = o.SiteQueues
		}
		res.Files = append(res.Files, File{Path: cert, Written: true, Role: l.role, TaskQueues: q}, File{Path: key, Written: true})
	}
	return res, nil
}

// existingIdentity checks a pair kept from an earlier run: it must carry
// the role this run would give it. A pair made before certificates had
// roles may do nothing on Kedge's Temporal: it is named, to be remade.
func existingIdentity(certPath, keyPath string, want Role) (Identity, error) {
	cert, err := readCert(certPath)
	if err != nil {
		return Identity{}, err
	}
	id, err := IdentityOf(cert)
	if err != nil {
		return Identity{}, fmt.Errorf("%s: %w: remove it and %s, then run this again to make it with role %s", certPath, err, keyPath, want)
	}
	if id.Role != want {
		return Identity{}, fmt.Errorf("%s has role %s, not %s: remove it and %s to make it again", certPath, id.Role, want, keyPath)
	}
	return id, nil
}

func readCert(path string) (*x509.Certificate, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return cert, nil
}

func loadOrMakeCA(o Options) (*x509.Certificate, crypto.Signer, bool, error) {
	certPath, keyPath := filepath.Join(o.Dir, "ca.pem"), filepath.Join(o.Dir, "ca.key")
	if exists(certPath) || exists(keyPath) {
		cert, key, err := loadPair(certPath, keyPath)
		if err != nil {
			return nil, nil, false, fmt.Errorf("the CA: %w", err)
		}
		return cert, key, false, nil
	}
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "kedge temporal CA", Organization: []string{"kedge"}},
		NotBefore:             o.Now.Add(-5 * time.Minute),
		NotAfter:              o.Now.Add(10 * 365 * 24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	if err := issue(tmpl, nil, nil, certPath, keyPath); err != nil {
		return nil, nil, false, err
	}
	cert, key, err := loadPair(certPath, keyPath)
	return cert, key, true, err
}

// issue makes a key and a certificate signed by parent (self-signed when
// parent is nil) and writes both, the key first and owner-only.
func issue(tmpl, parent *x509.Certificate, parentKey crypto.Signer, certPath, keyPath string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return err
	}
	tmpl.SerialNumber = serial
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := writeNew(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return err
	}
	return writeNew(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

func writeNew(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func loadPair(certPath, keyPath string) (*x509.Certificate, crypto.Signer, error) {
	cb, err := os.ReadFile(certPath)
	if err != nil {
		return nil, nil, err
	}
	kb, err := secretfile.Read(keyPath)
	if err != nil {
		return nil, nil, err
	}
	cblock, _ := pem.Decode(cb)
	kblock, _ := pem.Decode(kb)
	if cblock == nil || kblock == nil {
		return nil, nil, fmt.Errorf("%s or %s is not PEM", certPath, keyPath)
	}
	cert, err := x509.ParseCertificate(cblock.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", certPath, err)
	}
	k, err := x509.ParsePKCS8PrivateKey(kblock.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", keyPath, err)
	}
	signer, ok := k.(crypto.Signer)
	if !ok {
		return nil, nil, fmt.Errorf("%s: not a signing key", keyPath)
	}
	if !pubkey.Equal(signer.Public(), cert.PublicKey) {
		return nil, nil, fmt.Errorf("%s is not the key of %s", keyPath, certPath)
	}
	return cert, signer, nil
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return !errors.Is(err, fs.ErrNotExist)
}
