package inventory

import (
	"strings"
	"testing"

	"kedge.dev/kedge/actions/etcd"
)

const withBackups = `apiVersion: kedge/v1
kind: Cluster
metadata: {name: mercury}
ssh: {knownHostsFile: kh, agent: true}
controllers:
  - {name: cp-1, address: 10.0.0.1}
backups:
  local:
    kind: local
    path: /var/lib/kedge/backups
  offsite:
    kind: s3
    endpoint: https://s3.example:9000
    bucket: kedge-backups
    region: eu-west-1
    credentialsFile: /etc/kedge/s3.credentials
    caFile: /etc/kedge/s3-ca.pem
`

// The worker's operator defines the backup destinations by name; a run
// finds them by name, and a name not defined says which are.
func TestBackupsByName(t *testing.T) {
	c, err := decodeString(t, withBackups)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.Backup("local"); err != nil || got != (etcd.Destination{Kind: "local", Path: "/var/lib/kedge/backups"}) {
		t.Errorf("local: %+v %v", got, err)
	}
	want := etcd.Destination{Kind: "s3", Endpoint: "https://s3.example:9000", Bucket: "kedge-backups", Region: "eu-west-1",
		CredentialsFile: "/etc/kedge/s3.credentials", CAFile: "/etc/kedge/s3-ca.pem"}
	if got, err := c.Backup("offsite"); err != nil || got != want {
		t.Errorf("offsite: %+v %v", got, err)
	}
	if _, err := c.Backup("tape"); err == nil || !strings.Contains(err.Error(), `cluster mercury: the inventory defines no backup destination "tape" under backups: (it defines: local, offsite)`) {
		t.Errorf("tape: %v", err)
	}
	none, err := decodeString(t, strings.Split(withBackups, "backups:")[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := none.Backup("local"); err == nil || !strings.Contains(err.Error(), "(it defines: none)") {
		t.Errorf("no backups section: %v", err)
	}
}

// A destination that etcd.snapshot would refuse is an inventory error at
// its file, line and field.
func TestBackupsRefusedAtTheirField(t *testing.T) {
	for _, c := range []struct{ name, from, to, want string }{
		{"a relative path", "path: /var/lib/kedge/backups", "path: backups", `cluster.yaml:10:11: backups.local.path "backups" is not an absolute, clean path on the worker`},
		{"a path that climbs", "path: /var/lib/kedge/backups", "path: /var/../etc", `cluster.yaml:10:11: backups.local.path "/var/../etc" is not an absolute, clean path`},
		{"plain http", "endpoint: https://s3.example:9000", "endpoint: http://s3.example:9000", `cluster.yaml:13:15: backups.offsite.endpoint "http://s3.example:9000" is plain http: refused unless insecure is set`},
		{"a bucket", "bucket: kedge-backups", "bucket: Kedge/Backups", `cluster.yaml:14:13: backups.offsite.bucket "Kedge/Backups" is not an S3 bucket name`},
		{"no credentials", "    credentialsFile: /etc/kedge/s3.credentials\n", "", `cluster.yaml:12:5: backups.offsite.credentialsFile is required`},
		{"a kind", "kind: local", "kind: nfs", `cluster.yaml:9:11: backups.local.kind "nfs": want local or s3`},
		{"a field no destination has", "kind: local", "kind: local\n    command: rm -rf /", `cluster.yaml:10:5: unknown field "command" in backups.local`},
		{"a name that is a path", "  local:\n", "  /tmp/x:\n", `cluster.yaml:8:3: backups./tmp/x: a destination's name is a DNS label`},
	} {
		_, err := decodeString(t, strings.Replace(withBackups, c.from, c.to, 1))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v\nwant %s", c.name, err, c.want)
		}
	}
	if _, err := decodeString(t, strings.Split(withBackups, "backups:")[0]+"backups: [/tmp/x]\n"); err == nil || !strings.Contains(err.Error(), "backups must map names to destinations, got a list") {
		t.Errorf("a list: %v", err)
	}
}
