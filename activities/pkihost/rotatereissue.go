package pkihost

import (
	"context"
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"

	"kedge.dev/kedge/actions/errtype"
	"kedge.dev/kedge/actions/host"
	"kedge.dev/kedge/actions/pki"
	"kedge.dev/kedge/actions/vault"
)

// reissue issues anew, from the new CA, every certificate of the
// controller the old one signed: same subject and SANs, a new key.
func (r *rotation) reissue(ctx context.Context) error {
	creds, err := r.a.credentials(ctx, pki.RenewInput{Target: r.in.Target, Files: r.in.Files})
	if err != nil {
		return err
	}
	ttl := r.in.TTL
	if ttl == "" {
		ttl = "8760h"
	}
	for _, c := range creds {
		cur, file, err := r.a.current(ctx, r.in.Target, c)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(r.cas, func(ca rotated) bool { return cur.CheckSignatureFrom(ca.old) == nil })
		if i < 0 {
			continue // from the new CA already, or from one not rotated
		}
		ca := r.cas[i]
		dns := slices.Clone(cur.DNSNames)
		if c.addDNS != "" && !slices.Contains(dns, c.addDNS) {
			dns = append(dns, c.addDNS)
		}
		var ips []string
		for _, ip := range cur.IPAddresses {
			ips = append(ips, ip.String())
		}
		issued, err := r.a.Vault.IssueCert(ctx, vault.IssueCertInput{Vault: r.in.Vault, CommonName: cur.Subject.CommonName,
			Organization: cur.Subject.Organization, AltNames: dns, IPSANs: ips, Issuer: ca.in.Issuer, Verbatim: true,
			TTL: ttl, NotAfter: ca.new.NotAfter.UTC().Format(time.RFC3339)})
		if err != nil {
			return err
		}
		leaf, err := firstCert([]byte(issued.Certificate))
		if err != nil || leaf.CheckSignatureFrom(ca.new) != nil {
			return temporal.NewNonRetryableApplicationError(fmt.Sprintf("Vault issuer %s did not sign %s with %q", ca.in.Issuer, c.cert, ca.new.Subject.CommonName), errtype.ForeignIssuer, nil)
		}
		var key host.FileStat
		if c.kubeconfig == "" && c.key != c.cert {
			if key, err = r.a.Hosts.Stat(ctx, r.in.Target, c.key); err != nil {
				return err
			}
		}
		if c.kubeconfig != "" {
			// Its CA data may be in the bundle already (trust points
			// come first): replace the credential in that content.
			if i := slices.IndexFunc(r.files, func(f host.BundleFile) bool { return f.Path == c.kubeconfig }); i >= 0 {
				file.Content = r.files[i].Content
				r.files = slices.Delete(r.files, i, i+1)
			}
		}
		files, err := c.replace(file, key, r.in.Kind, issued.Certificate, issued.PrivateKey)
		if err != nil {
			return invalid(fmt.Sprintf("%s on %s: %v", c.cert, r.in.Target.Node, err))
		}
		for _, f := range files {
			reader := c.reader
			if c.etcd {
				reader = "etcd"
			}
			r.add(f, reader)
		}
		r.res.Reissued = append(r.res.Reissued, c.cert)
	}
	return nil
}
