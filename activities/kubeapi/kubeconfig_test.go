package kubeapi

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/activities/nodefiles"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/kube"
	"kedge.dev/kedge/actions/render"
	"kedge.dev/kedge/actions/target"
)

// apiServer stands in for an API server of the caller's choosing: it
// records every request (and its Authorization header) and knows one
// Ready node, w1.
type apiServer struct {
	*httptest.Server
	mu    sync.Mutex
	auths []string
}

func newAPIServer(t *testing.T) *apiServer {
	t.Helper()
	s := &apiServer{}
	s.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.auths = append(s.auths, r.Header.Get("Authorization"))
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/api/v1/nodes/w1" {
			fmt.Fprint(w, `{"kind":"Node","apiVersion":"v1","metadata":{"name":"w1"},"status":{"conditions":[{"type":"Ready","status":"True"}]}}`)
			return
		}
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
	}))
	t.Cleanup(s.Close)
	return s
}

// requests is what the server was sent: each request's Authorization.
func (s *apiServer) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.auths...)
}

func (s *apiServer) caPEM() string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw}))
}

// clientPair is a client certificate and key, PEM.
func clientPair(t *testing.T) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kedge-admin", Organization: []string{"system:masters"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, k.Public(), k)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd}))
}

// workerSecret writes a file only the worker may read: an SSH private
// key, a Vault token.
func workerSecret(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func sshPrivateKey(t *testing.T) string {
	t.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// kubeconfigWith is a kubeconfig for server whose one cluster entry and
// one user entry carry the YAML lines given.
func kubeconfigWith(server, cluster, user string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: %s
%s
users:
- name: u
  user:
%s
contexts:
- name: ctx
  context: {cluster: c, user: u}
current-context: ctx
`, server, cluster, user)
}

// refusedActs are the Kubernetes actions as the worker runs them, with
// their audit log.
func refusedActs() (*Activities, *bytes.Buffer) {
	var logs bytes.Buffer
	return &Activities{Logger: slog.New(slog.NewTextHandler(&logs, nil)), PollInterval: 10 * time.Millisecond, APIOutage: time.Millisecond}, &logs
}

// refused asserts err is a CredentialRefused that is not retried and
// names want.
func refused(t *testing.T, what string, err error, want string) {
	t.Helper()
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || !errtype.Is(err, errtype.CredentialRefused) || !app.NonRetryable() || !strings.Contains(err.Error(), want) {
		t.Errorf("%s: got %v, want a CredentialRefused that is not retried, naming %q", what, err, want)
	}
}

// A key holder saves a kubeconfig whose user is an exec credential
// plugin: the next kube action on the cluster would run it, as the
// worker's user (root). It must not run.
func TestASavedKubeconfigRunsNoPlugin(t *testing.T) {
	srv := newAPIServer(t)
	dir := t.TempDir()
	marker := filepath.Join(dir, "the-plugin-ran")
	c := target.Kube{Name: "mercury", Kubeconfig: filepath.Join(dir, "admin.conf")}
	content := kubeconfigWith(srv.URL, "    certificate-authority-data: "+b64(srv.caPEM()), fmt.Sprintf(`    exec:
      apiVersion: client.authentication.k8s.io/v1
      interactiveMode: Never
      command: /bin/sh
      args: ["-c", "touch %s; echo '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"t\"}}'"]`, marker))
	a, logs := refusedActs()
	_, saveErr := a.SaveKubeconfig(t.Context(), kube.SaveKubeconfigInput{Cluster: c, Content: content})
	_, useErr := a.GetNode(t.Context(), kube.NodeInput{Cluster: c, Node: "w1"})
	if _, err := os.Stat(marker); err == nil {
		t.Fatalf("the exec plugin of a saved kubeconfig ran as the worker (save: %v, get-node: %v)", saveErr, useErr)
	}
	refused(t, "save", saveErr, "users[u].exec")
	if _, err := os.Stat(c.Kubeconfig); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused kubeconfig was written: %v", err)
	}
	if n := len(srv.requests()); n != 0 {
		t.Errorf("the caller's server was sent %d requests", n)
	}
	if l := logs.String(); !strings.Contains(l, "audit=true") || !strings.Contains(l, "kubeconfig refused") {
		t.Errorf("no audit line: %s", l)
	}
}

// A key holder saves a kubeconfig whose user reads its token from a
// worker's secret file, and whose server is theirs: the secret must not
// reach them as a bearer token.
func TestASavedKubeconfigSendsNoWorkerSecret(t *testing.T) {
	srv := newAPIServer(t)
	dir := t.TempDir()
	token := workerSecret(t, t.TempDir(), "vault-token", "s.the-workers-vault-token")
	c := target.Kube{Name: "mercury", Kubeconfig: filepath.Join(dir, "admin.conf")}
	content := kubeconfigWith(srv.URL, "    certificate-authority-data: "+b64(srv.caPEM()), "    tokenFile: "+token)
	a, _ := refusedActs()
	_, saveErr := a.SaveKubeconfig(t.Context(), kube.SaveKubeconfigInput{Cluster: c, Content: content})
	_, useErr := a.GetNode(t.Context(), kube.NodeInput{Cluster: c, Node: "w1"})
	for _, auth := range srv.requests() {
		if strings.Contains(auth, "s.the-workers-vault-token") {
			t.Fatalf("the worker's Vault token went to the caller's server as %q (save: %v, get-node: %v)", auth, saveErr, useErr)
		}
	}
	refused(t, "save", saveErr, "users[u].tokenFile")
	if n := len(srv.requests()); n != 0 {
		t.Errorf("the caller's server was sent %d requests", n)
	}
}

// A key holder saves a kubeconfig whose certificate authority is the
// worker's SSH private key: kube.cluster-info must not hand it back.
func TestASavedKubeconfigReadsNoWorkerFile(t *testing.T) {
	srv := newAPIServer(t)
	key := sshPrivateKey(t)
	idFile := workerSecret(t, t.TempDir(), "id_ed25519", key)
	dir := t.TempDir()
	c := target.Kube{Name: "mercury", Kubeconfig: filepath.Join(dir, "admin.conf")}
	cert, ckey := clientPair(t)
	content := kubeconfigWith(srv.URL, "    certificate-authority: "+idFile,
		"    client-certificate-data: "+b64(cert)+"\n    client-key-data: "+b64(ckey))
	a, _ := refusedActs()
	_, saveErr := a.SaveKubeconfig(t.Context(), kube.SaveKubeconfigInput{Cluster: c, Content: content})
	info, infoErr := a.ClusterInfo(t.Context(), kube.ClusterInfoInput{Cluster: c})
	if strings.Contains(info.CACert, "PRIVATE KEY") {
		t.Fatalf("kube.cluster-info handed back the worker's SSH private key as caCert (save: %v)", saveErr)
	}
	refused(t, "save", saveErr, "clusters[c].certificate-authority")
	if infoErr == nil {
		t.Errorf("cluster-info of a kubeconfig never saved: %+v", info)
	}
}

// Kubeconfigs the worker loads are checked every time, whoever put them
// there: one placed by hand (or by an older worker) with a plugin, a
// token file or a file outside its directory is refused at load with an
// audit line, and nothing is sent or run.
func TestEveryLoadedKubeconfigIsChecked(t *testing.T) {
	srv := newAPIServer(t)
	cert, key := clientPair(t)
	outside := t.TempDir()
	sshKey := workerSecret(t, outside, "id_ed25519", sshPrivateKey(t))
	token := workerSecret(t, outside, "vault-token", "s.the-workers-vault-token")
	certOutside := workerSecret(t, outside, "admin.crt", cert)

	place := func(t *testing.T, dir, content string) target.Kube {
		t.Helper()
		return target.Kube{Name: "mercury", Kubeconfig: workerSecret(t, dir, "admin.conf", content)}
	}
	ca := "    certificate-authority-data: " + b64(srv.caPEM())
	marker := filepath.Join(outside, "the-plugin-ran")
	for name, c := range map[string]struct {
		cluster, user string
		beside        map[string]string // files in the kubeconfig's directory
		want          string
	}{
		"an exec plugin":   {ca, fmt.Sprintf("    exec: {apiVersion: client.authentication.k8s.io/v1, interactiveMode: Never, command: /bin/sh, args: [-c, 'touch %s']}", marker), nil, "users[u].exec"},
		"an auth-provider": {ca, "    auth-provider: {name: oidc, config: {idp-issuer-url: 'https://issuer.example', client-id: kedge}}", nil, "users[u].auth-provider"},
		"a token file":     {ca, "    tokenFile: " + token, nil, "users[u].tokenFile"},
		"a CA outside":     {"    certificate-authority: " + sshKey, "    token: t", nil, "outside the kubeconfig's own directory"},
		"a CA up and out":  {"    certificate-authority: UP-AND-OUT", "    token: t", nil, `climbs out with ".."`},
		"a CA beside that is a key": {"    certificate-authority: id_ed25519", "    token: t",
			map[string]string{"id_ed25519": sshPrivateKey(t)}, `holds a PEM "PRIVATE KEY" block`},
		"a client certificate outside": {ca, "    client-certificate: " + certOutside + "\n    client-key-data: " + b64(key), nil, "outside the kubeconfig's own directory"},
		"a client key outside":         {ca, "    client-certificate-data: " + b64(cert) + "\n    client-key: " + sshKey, nil, "users[u].client-key"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			for f, content := range c.beside {
				workerSecret(t, dir, f, content)
			}
			up, err := filepath.Rel(dir, sshKey) // ../../TestX/001/id_ed25519: the worker's key, by a relative path
			if err != nil {
				t.Fatal(err)
			}
			kc := place(t, dir, kubeconfigWith(srv.URL, strings.ReplaceAll(c.cluster, "UP-AND-OUT", up), c.user))
			a, logs := refusedActs()
			_, err = a.GetNode(t.Context(), kube.NodeInput{Cluster: kc, Node: "w1"})
			refused(t, "get-node", err, c.want)
			_, err = a.ClusterInfo(t.Context(), kube.ClusterInfoInput{Cluster: kc})
			refused(t, "cluster-info", err, c.want)
			_, err = a.WaitAPIServer(t.Context(), kube.WaitAPIServerInput{Cluster: kc, Timeout: "1s"})
			refused(t, "wait-apiserver", err, c.want)
			if l := logs.String(); !strings.Contains(l, "audit=true") || !strings.Contains(l, kc.Kubeconfig) {
				t.Errorf("no audit line naming the kubeconfig: %s", l)
			}
		})
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the exec plugin ran")
	}
	for _, auth := range srv.requests() {
		t.Errorf("a refused kubeconfig reached the server (Authorization %q)", auth)
	}

	// The kubeconfig itself is the worker's secret: its mode and owner.
	dir := t.TempDir()
	kc := place(t, dir, kubeconfigWith(srv.URL, ca, "    token: t"))
	if err := os.Chmod(kc.Kubeconfig, 0o644); err != nil {
		t.Fatal(err)
	}
	a, _ := refusedActs()
	_, err := a.GetNode(t.Context(), kube.NodeInput{Cluster: kc, Node: "w1"})
	refused(t, "a kubeconfig others may read", err, "chmod 600")
	if os.Geteuid() == 0 {
		if err := os.Chmod(kc.Kubeconfig, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(kc.Kubeconfig, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		_, err := a.GetNode(t.Context(), kube.NodeInput{Cluster: kc, Node: "w1"})
		refused(t, "a kubeconfig owned by nobody", err, "uid 65534")
	}
	if n := len(srv.requests()); n != 0 {
		t.Errorf("the server was sent %d requests", n)
	}
}

// What operators write keeps working: files beside the kubeconfig (as
// kubeadm and the lab's control plane write them) are read by the worker
// and embedded; the CA comes back from cluster-info.
func TestAKubeconfigWithItsFilesBesideItLoads(t *testing.T) {
	srv := newAPIServer(t)
	cert, key := clientPair(t)
	dir := t.TempDir()
	workerSecret(t, dir, "ca.crt", srv.caPEM())
	workerSecret(t, dir, "admin.crt", cert)
	workerSecret(t, dir, "admin.key", key)
	kc := target.Kube{Name: "mercury", Kubeconfig: workerSecret(t, dir, "admin.conf",
		kubeconfigWith(srv.URL, "    certificate-authority: ca.crt", "    client-certificate: "+filepath.Join(dir, "admin.crt")+"\n    client-key: admin.key"))}
	a, logs := refusedActs()
	n, err := a.GetNode(t.Context(), kube.NodeInput{Cluster: kc, Node: "w1"})
	if err != nil || !n.Exists || !n.Ready {
		t.Fatalf("get-node: %+v %v", n, err)
	}
	info, err := a.ClusterInfo(context.Background(), kube.ClusterInfoInput{Cluster: kc})
	if err != nil || info.Server != srv.URL || info.CACert != srv.caPEM() {
		t.Errorf("cluster-info: %+v %v", info, err)
	}
	if strings.Contains(logs.String(), "refused") {
		t.Errorf("refused: %s", logs.String())
	}
}

// Bootstrap keeps working: the admin kubeconfig render.kubeconfig makes
// of Vault-issued credentials is saved, and the kube actions that follow
// reach the server through it. Anything more is refused, naming the
// field.
func TestSaveKeepsWhatBootstrapRenders(t *testing.T) {
	srv := newAPIServer(t)
	cert, key := clientPair(t)
	good, err := nodefiles.Kubeconfig(render.KubeconfigInput{ClusterName: "mercury", Server: srv.URL, CACert: srv.caPEM(),
		User: "kedge-admin", ClientCert: cert, ClientKey: key})
	if err != nil {
		t.Fatal(err)
	}
	servers, err := Saveable(string(good))
	if err != nil || len(servers) != 1 || servers[0] != srv.URL {
		t.Fatalf("what bootstrap renders: %v %v", servers, err)
	}
	c := target.Kube{Name: "mercury", Kubeconfig: filepath.Join(t.TempDir(), "kube", "admin.conf")}
	a, _ := refusedActs()
	if res, err := a.SaveKubeconfig(t.Context(), kube.SaveKubeconfigInput{Cluster: c, Content: string(good)}); err != nil || !res.Changed {
		t.Fatalf("save: %+v %v", res, err)
	}
	if fi, err := os.Stat(c.Kubeconfig); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("saved kubeconfig: %v %v", fi, err)
	}
	if n, err := a.GetNode(t.Context(), kube.NodeInput{Cluster: c, Node: "w1"}); err != nil || !n.Ready {
		t.Errorf("get-node through the saved kubeconfig: %+v %v", n, err)
	}
	if info, err := a.ClusterInfo(t.Context(), kube.ClusterInfoInput{Cluster: c}); err != nil || info.CACert != srv.caPEM() {
		t.Errorf("cluster-info: %+v %v", info, err)
	}

	token, err := nodefiles.Kubeconfig(render.KubeconfigInput{ClusterName: "mercury", Server: srv.URL, CACert: srv.caPEM(), User: "u", Token: "abcdef.0123456789abcdef"})
	if err != nil {
		t.Fatal(err)
	}
	ca := "    certificate-authority-data: " + b64(srv.caPEM())
	certs := "    client-certificate-data: " + b64(cert) + "\n    client-key-data: " + b64(key)
	for _, c := range []struct{ content, want string }{
		{string(token), "users[u].token"},
		{kubeconfigWith("http://"+srv.Listener.Addr().String(), ca, certs), "clusters[c].server"},
		{kubeconfigWith(srv.URL+"/proxy", ca, certs), "clusters[c].server"},
		{kubeconfigWith(srv.URL, "", certs), "clusters[c].certificate-authority-data: holds no certificate"},
		{kubeconfigWith(srv.URL, "    certificate-authority-data: "+b64(key), certs), `holds a PEM "PRIVATE KEY" block`},
		{kubeconfigWith(srv.URL, ca+"\n    insecure-skip-tls-verify: true", certs), "insecure-skip-tls-verify"},
		{kubeconfigWith(srv.URL, ca+"\n    proxy-url: http://127.0.0.1:3128", certs), "proxy-url"},
		{kubeconfigWith(srv.URL, ca+"\n    tls-server-name: elsewhere", certs), "tls-server-name"},
		{kubeconfigWith(srv.URL, ca, certs+"\n    as: system:admin"), "impersonation"},
		{kubeconfigWith(srv.URL, ca, certs+"\n    username: admin\n    password: admin"), "username/password"},
		{kubeconfigWith(srv.URL, ca, "    client-certificate-data: "+b64(cert)), "client-key-data"},
		{kubeconfigWith(srv.URL, ca, "    client-certificate: admin.crt\n    client-key-data: "+b64(key)), "users[u].client-certificate"},
		{kubeconfigWith(srv.URL, ca, "    client-certificate-data: "+b64(cert)+"\n    client-key: admin.key"), "users[u].client-key"},
		{strings.Replace(kubeconfigWith(srv.URL, ca, certs), "current-context: ctx", "current-context: other", 1), "current-context"},
		{"not: [a kubeconfig", "not a kubeconfig"},
	} {
		if _, err := Saveable(c.content); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want a refusal naming %q, got %v for\n%s", c.want, err, c.content)
		}
	}
}
