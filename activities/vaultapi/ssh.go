package vaultapi

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"golang.org/x/crypto/ssh"

	"kedge.dev/kedge/activities/sshpool"

	"kedge.dev/kedge/actions/target"
)

// certRenewBefore is how long before its end a login certificate is
// replaced by a fresh one.
const certRenewBefore = 2 * time.Minute

type loginCert struct {
	signer      ssh.Signer
	validBefore time.Time
}

// SSHSigners is an sshpool Options.Signers: for a target whose inventory
// names a Vault SSH signer, it returns a short-lived certificate for a
// fresh ed25519 key, signed by Vault for the target's user. Certificates
// are reused until shortly before they expire. Targets without a signer
// get none (the pool then uses the identity file or the agent).
func (a *Activities) SSHSigners(ctx context.Context, t target.SSH) ([]ssh.Signer, error) {
	ca := t.VaultCA
	if ca == nil {
		return nil, nil
	}
	user := t.UserOrDefault()
	key := ca.Address + "|" + ca.Mount + "|" + ca.Role + "|" + user
	a.mu.Lock()
	if c, ok := a.certs[key]; ok && time.Until(c.validBefore) > certRenewBefore {
		a.mu.Unlock()
		return []ssh.Signer{c.signer}, nil
	}
	a.mu.Unlock()

	cl, err := a.client(target.Vault{Address: ca.Address, TokenFile: ca.TokenFile, CAFile: ca.CAFile})
	if err != nil {
		return nil, err
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, err
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return nil, err
	}
	op := fmt.Sprintf("sign a login certificate for %s at %s/sign/%s", user, ca.Mount, ca.Role)
	sec, err := cl.Logical().WriteWithContext(ctx, ca.Mount+"/sign/"+ca.Role, map[string]any{
		"public_key": string(ssh.MarshalAuthorizedKey(sshPub)), "valid_principals": user, "cert_type": "user",
	})
	if err != nil {
		err = classify(op, err)
		var app *temporal.ApplicationError
		if errors.As(err, &app) && !app.NonRetryable() {
			// Vault is down or failing: the pool retries the step rather
			// than counting it an authentication failure.
			return nil, fmt.Errorf("%w: %w", err, sshpool.ErrUnreachable)
		}
		return nil, err
	}
	if sec == nil || sec.Data == nil {
		return nil, fmt.Errorf("%s: empty answer: %w", op, sshpool.ErrUnreachable)
	}
	signed, _ := sec.Data["signed_key"].(string)
	parsed, _, _, _, err := ssh.ParseAuthorizedKey([]byte(signed))
	if err != nil {
		return nil, fmt.Errorf("%s: parse the signed key: %w", op, err)
	}
	cert, ok := parsed.(*ssh.Certificate)
	if !ok {
		return nil, fmt.Errorf("%s: vault returned a %s, not a certificate", op, parsed.Type())
	}
	certSigner, err := ssh.NewCertSigner(cert, signer)
	if err != nil {
		return nil, err
	}
	c := loginCert{signer: certSigner, validBefore: time.Unix(int64(cert.ValidBefore), 0)}
	a.mu.Lock()
	if a.certs == nil {
		a.certs = map[string]loginCert{}
	}
	a.certs[key] = c
	a.mu.Unlock()
	return []ssh.Signer{c.signer}, nil
}
