package sshpool

import (
	"context"
	"testing"

	"golang.org/x/crypto/ssh"

	"kedge.dev/kedge/integration/sshtest"

	"kedge.dev/kedge/actions/target"
)

// Two inventories that reach one host through different Vault signer
// roles must not share a connection: the second would skip its own
// role's checks.
func TestVaultSignerRoleIsPartOfTheConnection(t *testing.T) {
	srv := sshtest.Start(t, sshtest.Config{})
	t.Setenv("SSH_AUTH_SOCK", "")
	var roles []string
	p := New(Options{Signers: func(_ context.Context, got target.SSH) ([]ssh.Signer, error) {
		roles = append(roles, got.VaultCA.Role)
		return []ssh.Signer{srv.ClientKey}, nil
	}})
	defer p.Close()
	for _, role := range []string{"kedge", "other", "kedge"} {
		tg := sshTarget(srv)
		tg.IdentityFile = ""
		tg.VaultCA = &target.VaultCA{Address: "http://127.0.0.1:8200", Mount: "ssh-client-signer", Role: role}
		if out, err := run(t.Context(), p, tg, "echo "+role); err != nil || out != role+"\n" {
			t.Fatalf("%s: %q %v", role, out, err)
		}
	}
	if len(roles) != 2 || roles[0] != "kedge" || roles[1] != "other" || srv.Accepted() != 2 {
		t.Errorf("signer asked for %v over %d connections, want [kedge other] over 2", roles, srv.Accepted())
	}
}
