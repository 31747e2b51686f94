package host

import (
	"time"

	"kedge.dev/kedge/actions/spec"
	"kedge.dev/kedge/actions/target"
)

// WriteDropInAction renders and writes a systemd drop-in.
const WriteDropInAction = "host.write-dropin"

// WriteDropInInput sets environment variables of a unit through a drop-in
// (/etc/systemd/system/UNIT.d/NAME), e.g. KUBELET_IMAGE for an image swap.
type WriteDropInInput struct {
	Target      target.SSH        `json:"target"`
	Unit        string            `json:"unit" kedge:"required" doc:"unit name, e.g. kubelet.service"`
	Name        string            `json:"name" kedge:"required" doc:"drop-in file name, e.g. 10-image.conf"`
	Environment map[string]string `json:"environment" kedge:"required" doc:"variables the drop-in sets (Environment=)"`
}

func init() {
	spec.Register(spec.Row{Name: WriteDropInAction, Doc: "render a systemd drop-in setting environment variables (e.g. KUBELET_IMAGE) and write it like host.write-file",
		In: WriteDropInInput{}, Out: WriteFileResult{}, Timeout: 5 * time.Minute,
		Summary: `write drop-in /etc/systemd/system/{{.In "unit"}}.d/{{.In "name"}}{{.On}}`})
}
