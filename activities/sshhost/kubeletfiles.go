package sshhost

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/pkg/sftp"

	"kedge.dev/kedge/activities/nodefiles"

	"kedge.dev/kedge/actions/layout"

	"kedge.dev/kedge/actions/host"
	"kedge.dev/kedge/actions/target"
)

// KubeletFiles reads how a worker runs its kubelet (its unit, drop-ins,
// kubelet.path and KubeletConfiguration; never a credential) and what its
// host has for it (layout.ReadHostSetup: containerd's configuration, the
// kernel modules and sysctls, the units the kubelet requires), and
// returns those files as they must be on another node, registering with
// that node's labels and taints (layout.Relabel, layout.Retarget): what a
// node-join into a cluster Kedge did not build writes.
func (a *Activities) KubeletFiles(ctx context.Context, in host.KubeletFilesInput) (host.KubeletFilesResult, error) {
	res, err := a.kubeletFiles(ctx, in)
	return res, toTemporal(err)
}

func (a *Activities) kubeletFiles(ctx context.Context, in host.KubeletFilesInput) (host.KubeletFilesResult, error) {
	t := in.Target
	if in.For.NodeName == "" {
		return host.KubeletFilesResult{}, invalid("for.nodeName is required")
	}
	if in.Image != "" {
		if err := checkImage(in.Image); err != nil {
			return host.KubeletFilesResult{}, err
		}
	}
	require := in.Require
	if len(require) == 0 {
		require = []string{layout.KindTyphoonFlatcar, layout.KindTyphoonFCOS}
	}
	l, err := a.layout(ctx, host.LayoutInput{Target: t, Require: require})
	if err != nil {
		return host.KubeletFilesResult{}, err
	}
	if l.Role != "worker" {
		return host.KubeletFilesResult{}, invalid(fmt.Sprintf("%s is a %s: a new worker is made like a worker (like=WORKER)", t.Name(), l.Role))
	}
	k := l.Kubelet
	if in.Image != "" && k.ImageOverriddenBy != "" {
		return host.KubeletFilesResult{}, invalid(fmt.Sprintf("%s: %s sets KUBELET_IMAGE after %s, so image=%s would not take effect on the new node", t.Name(), k.ImageOverriddenBy, layout.ImageDropIn, in.Image))
	}
	paths, err := layout.KubeletFiles(l)
	if err != nil {
		return host.KubeletFilesResult{}, invalid(fmt.Sprintf("%s: %v", t.Name(), err))
	}
	var files []layout.CopyFile
	for _, p := range paths {
		f, err := a.readFile(ctx, host.ReadFileInput{Target: t, Path: p, MaxBytes: 1 << 20})
		if err != nil {
			return host.KubeletFilesResult{}, err
		}
		if f.ContentBase64 != "" {
			return host.KubeletFilesResult{}, invalid(fmt.Sprintf("%s on %s is not text", p, t.Name()))
		}
		files = append(files, layout.CopyFile{Path: p, Content: f.Content, Mode: f.Mode})
	}
	image := k.Image
	if in.Image != "" {
		image = in.Image
		content, err := nodefiles.DropIn(map[string]string{layout.ImageVariable: in.Image})
		if err != nil {
			return host.KubeletFilesResult{}, invalid(err.Error())
		}
		i := slices.IndexFunc(files, func(f layout.CopyFile) bool { return f.Path == layout.ImageDropIn })
		if i < 0 {
			files = append(files, layout.CopyFile{Path: layout.ImageDropIn, Mode: "0644"})
			i = len(files) - 1
		}
		files[i].Content = content
	}
	// The kubelet may not register with every label (node-role.…): the
	// runbook sets those once the Node is there.
	var labels []string
	for _, lb := range in.Labels {
		if key, _, _ := strings.Cut(lb, "="); nodefiles.KubeletMaySetLabel(key) {
			labels = append(labels, lb)
		}
	}
	if files, err = layout.Relabel(files, labels, in.Taints, l.Role == layout.RoleController); err != nil {
		return host.KubeletFilesResult{}, invalid(fmt.Sprintf("%s: %v", t.Name(), err))
	}
	setup, err := a.hostSetup(ctx, t, l)
	if err != nil {
		return host.KubeletFilesResult{}, err
	}
	from := layout.Identity{NodeName: l.NodeName, Hostname: l.Hostname, Address: t.Address}
	out, err := layout.Retarget(append(files, setup.Files...), from, in.For)
	if err != nil {
		return host.KubeletFilesResult{}, invalid(fmt.Sprintf("%s: %v", t.Name(), err))
	}
	res := host.KubeletFilesResult{Kind: l.Kind, Runtime: k.Runtime, Image: image, Reference: l.NodeName,
		BootstrapKubeconfig: k.BootstrapKubeconfig, ClientCAFile: k.ClientCAFile, PathExists: k.PathExists,
		ServiceEnabled: k.Enabled == "enabled", PathEnabled: k.PathEnabled == "enabled",
		Modules: setup.Modules, SysctlFiles: setup.SysctlFiles, Enable: setup.Enable, Start: setup.Start}
	for _, f := range out {
		res.Files = append(res.Files, host.BundleFile{Path: f.Path, Content: f.Content, Mode: f.Mode})
	}
	if res.BootstrapKubeconfig == "" {
		return host.KubeletFilesResult{}, invalid(fmt.Sprintf("%s: the kubelet has no --bootstrap-kubeconfig: a new node could not join through TLS bootstrap", t.Name()))
	}
	return res, nil
}

// hostSetup reads the reference's host files (layout.ReadHostSetup), each
// with its mode. A reference without a file Kedge must copy is refused.
func (a *Activities) hostSetup(ctx context.Context, t target.SSH, l layout.Layout) (layout.HostSetup, error) {
	var setup layout.HostSetup
	var setupErr error
	r := &modeReader{modes: map[string]string{}}
	err := a.Pool.WithSFTP(ctx, t, func(c *sftp.Client) error {
		r.sftpReader = sftpReader{c}
		setup, setupErr = layout.ReadHostSetup(l, r)
		var fe *fileReadError
		if errors.As(setupErr, &fe) {
			return fe.err
		}
		return nil
	})
	if err != nil {
		return setup, a.fileErr(t, "read", "the host files under /etc", err)
	}
	if setupErr != nil {
		return setup, invalid(fmt.Sprintf("%s: %v", t.Name(), setupErr))
	}
	for i, f := range setup.Files {
		setup.Files[i].Mode = r.modes[f.Path]
	}
	return setup, nil
}

// modeReader reads the host's files and keeps each one's mode.
type modeReader struct {
	sftpReader
	modes map[string]string
}

func (r *modeReader) ReadFile(p string) ([]byte, error) {
	f, err := readIfExists(r.c, p, maxLayoutFile)
	var big *tooBigError
	switch {
	case errors.As(err, &big):
		return nil, fmt.Errorf("%s: %w", p, err)
	case err != nil:
		return nil, &fileReadError{fmt.Errorf("%s: %w", p, err)}
	case f == nil:
		return nil, fmt.Errorf("%s: %w", p, fs.ErrNotExist)
	}
	if !utf8.Valid(f.data) {
		return nil, fmt.Errorf("%s is not text", p)
	}
	r.modes[p] = fmt.Sprintf("%04o", f.mode)
	return f.data, nil
}
