package pki

import (
	"time"

	"kedge.dev/kedge/actions/host"
	"kedge.dev/kedge/actions/layout"
	"kedge.dev/kedge/actions/spec"
	"kedge.dev/kedge/actions/target"
)

// Action names.
const (
	AdoptAction = "pki.adopt"
	RenewAction = "pki.renew-in-place"
)

// AdoptInput names where a controller keeps its cluster's CAs and keys.
type AdoptInput struct {
	Target      target.SSH        `json:"target"`
	Vault       target.Vault      `json:"vault"`
	ClusterName string            `json:"clusterName" kedge:"required" doc:"the cluster's name (the inventory's metadata.name): where Vault keeps what is adopted"`
	Files       map[string]string `json:"files" kedge:"required" doc:"the controller's files as host.layout reports them (cluster-ca, cluster-ca-key, service-account-key, service-account-pub, etcd's CA)"`
	EtcdCAKey   string            `json:"etcdCAKey" kedge:"required" doc:"etcd's CA key, PEM (Typhoon keeps it with the cluster's assets, not on hosts)"`
	APIServer   string            `json:"apiServer,omitempty" doc:"the API server's DNS name, recorded with the adoption"`
	// AggregationCAKey is the front-proxy CA's key, required when the
	// layout names that CA (Typhoon keeps it only in its Terraform state).
	AggregationCAKey string `json:"aggregationCAKey,omitempty" doc:"the front-proxy (aggregation) CA's key, PEM: required when the API server names that CA (--requestheader-client-ca-file)"`
}

// AdoptResult is what Vault now keeps. No private key is in it.
type AdoptResult struct {
	Issuer                  string `json:"issuer"`
	Certificate             string `json:"certificate"`
	EtcdIssuer              string `json:"etcdIssuer"`
	EtcdCertificate         string `json:"etcdCertificate"`
	AggregationIssuer       string `json:"aggregationIssuer,omitempty"`
	AggregationCertificate  string `json:"aggregationCertificate,omitempty"`
	ServiceAccountPublicKey string `json:"serviceAccountPublicKey"`
	Created                 bool   `json:"created"`
}

// RenewInput names a controller's files and the CAs that may renew them.
type RenewInput struct {
	Target     target.SSH        `json:"target"`
	Vault      target.Vault      `json:"vault"`
	Files      map[string]string `json:"files" kedge:"required" doc:"the controller's files as host.layout reports them"`
	CACert     string            `json:"caCert" kedge:"required" doc:"the cluster CA (PEM), as vault.cluster-ca returns it"`
	Issuer     string            `json:"issuer" kedge:"required" doc:"the cluster CA's Vault issuer"`
	EtcdCACert string            `json:"etcdCACert" kedge:"required" doc:"etcd's CA (PEM)"`
	EtcdIssuer string            `json:"etcdIssuer" kedge:"required" doc:"etcd's CA's Vault issuer"`
	// AggregationCACert and AggregationIssuer are the front-proxy CA the
	// API server's proxy client certificate comes from, when the layout
	// names one.
	AggregationCACert string `json:"aggregationCACert,omitempty" doc:"the front-proxy (aggregation) CA (PEM), when the layout names one"`
	AggregationIssuer string `json:"aggregationIssuer,omitempty" doc:"the front-proxy CA's Vault issuer"`
	APIServer         string `json:"apiServer,omitempty" doc:"a DNS name the API server's serving certificate must hold (added when missing)"`
	// Force renews every certificate, due or not (still never past its
	// CA's end).
	Force     bool   `json:"force,omitempty" doc:"renew every certificate now, whatever its end (never past its CA's)"`
	Threshold string `json:"threshold,omitempty" kedge:"duration" doc:"renew what ends within this (default 720h)"`
	TTL       string `json:"ttl,omitempty" kedge:"duration" doc:"lifetime of the new certificates (default 8760h), never past their CA's end"`
	// Kind is the host's layout: the mode and owner a missing key file
	// is created with (layout.Documented).
	Kind string `json:"kind,omitempty" doc:"the host's layout (host.layout's kind): a key file that was missing is created with the layout's documented mode and owner"`
	// RunAs is who each component runs as (host.layout's runAs): the
	// result lists each installed file with who reads it, for
	// host.check-readable.
	RunAs map[string]layout.RunAs `json:"runAs,omitempty" doc:"who each component runs as (host.layout's runAs); each installed file is listed in readers with who reads it (root when not given)"`
}

// RenewResult says what was renewed. Files, Backup, Created and Changed
// are host.install-bundle's: host.restore-bundle undoes the renewal.
type RenewResult struct {
	Due     bool     `json:"due"`
	Renewed []string `json:"renewed"`
	// Etcd and ControlPlane say whose certificates changed: etcd's
	// (restart etcd) or the API server's, controller-manager's or
	// scheduler's (restart their static pods).
	Etcd         bool     `json:"etcd"`
	ControlPlane bool     `json:"controlPlane"`
	Changed      bool     `json:"changed"`
	Files        []string `json:"files"`
	Backup       string   `json:"backup"`
	Created      []string `json:"created"`
	// Readers are the installed files, each with a process that reads
	// it and who that runs as: host.check-readable checks them before
	// anything restarts.
	Readers []host.FileReader `json:"readers"`
}

func init() {
	spec.Register(spec.Row{Name: AdoptAction, Doc: "take a running cluster's trust into Vault from a controller: its CA and key (a PKI issuer, where vault.cluster-ca looks), etcd's CA (its key given, kept in Vault only) and the service-account key pair (where vault.key-pair looks); never replaces what Vault already keeps",
		In: AdoptInput{}, Out: AdoptResult{}, Timeout: 2 * time.Minute,
		Summary: `take the cluster's CAs and service-account key into Vault from{{.On}}`})
}

func init() {
	spec.Register(spec.Row{Name: RenewAction, Doc: "renew a controller's certificates where its layout keeps them, each from the CA that issued it, same subject and SANs, new keys, installed all or none (undo with host.restore-bundle); keys pass only from the worker to the host",
		In: RenewInput{}, Out: RenewResult{}, Timeout: 5 * time.Minute,
		Summary: `renew certificates in place{{.On}}`})
}
