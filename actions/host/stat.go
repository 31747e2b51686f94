package host

// FileStat is a file's mode and owner. It is no action's result: it is
// what activities/sshhost's Stat answers activities/pkihost (through pki.Hosts),
// declared here so pki needs no other activity package.
type FileStat struct {
	Exists bool
	Mode   string // octal, e.g. 0644
	UID    uint32
	GID    uint32
}
