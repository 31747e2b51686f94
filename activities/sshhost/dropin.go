package sshhost

import (
	"context"
	"fmt"
	"path"
	"regexp"

	"kedge.dev/kedge/activities/nodefiles"

	"kedge.dev/kedge/actions/host"
)

var dropInNameRE = regexp.MustCompile(`^[A-Za-z0-9_.@-]+\.conf$`)

// WriteDropIn renders the drop-in and writes it atomically, keeping the
// previous one for undo (host.write-dropin).
func (a *Activities) WriteDropIn(ctx context.Context, in host.WriteDropInInput) (host.WriteFileResult, error) {
	if !unitRE.MatchString(in.Unit) {
		return host.WriteFileResult{}, toTemporal(invalid(fmt.Sprintf("unit %q is not a unit name", in.Unit)))
	}
	if !dropInNameRE.MatchString(in.Name) {
		return host.WriteFileResult{}, toTemporal(invalid(fmt.Sprintf("drop-in name %q must end in .conf", in.Name)))
	}
	content, err := nodefiles.DropIn(in.Environment)
	if err != nil {
		return host.WriteFileResult{}, toTemporal(invalid(err.Error()))
	}
	return a.WriteFile(ctx, host.WriteFileInput{
		Target:  in.Target,
		Path:    path.Join("/etc/systemd/system", in.Unit+".d", in.Name),
		Content: content,
		Mode:    "0644",
	})
}
