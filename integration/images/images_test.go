package images

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"kedge.dev/kedge/runbooks"
)

func TestArchiveIsADockerArchiveAndCached(t *testing.T) {
	t.Setenv("KEDGE_IMAGES_CACHE", t.TempDir())
	img := Image{Ref: "images.example/probe:v1", Entrypoint: []string{"/bin/probe"},
		Files: []File{
			{Path: "/bin/probe", Data: []byte("#!/bin/sh\n"), Mode: 0o755},
			{Path: "/etc/hello", Data: []byte("hello\n")},
			{Path: "/bin/sh", Link: "probe"},
		}}
	// Built once however many ask at the same time.
	var wg sync.WaitGroup
	paths := make([]string, 4)
	errs := make([]error, 4)
	for i := range paths {
		wg.Go(func() { paths[i], errs[i] = Archive(img) })
	}
	wg.Wait()
	for i := range paths {
		if errs[i] != nil || paths[i] != paths[0] {
			t.Fatalf("archive %d: %q %v (first %q)", i, paths[i], errs[i], paths[0])
		}
	}
	entries := readTar(t, paths[0])
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(entries["manifest.json"], &manifest); err != nil || len(manifest) != 1 {
		t.Fatalf("manifest.json: %v %s", err, entries["manifest.json"])
	}
	m := manifest[0]
	if len(m.RepoTags) != 1 || m.RepoTags[0] != img.Ref || len(m.Layers) != 1 {
		t.Fatalf("manifest %+v", m)
	}
	var config struct {
		OS     string `json:"os"`
		Config struct {
			Entrypoint []string
		} `json:"config"`
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	if err := json.Unmarshal(entries[m.Config], &config); err != nil {
		t.Fatal(err)
	}
	layer := entries[m.Layers[0]]
	sum := sha256.Sum256(layer)
	if config.OS != "linux" || len(config.RootFS.DiffIDs) != 1 || config.RootFS.DiffIDs[0] != "sha256:"+hex.EncodeToString(sum[:]) {
		t.Fatalf("config %+v, layer sha256 %x", config, sum)
	}
	if strings.Join(config.Config.Entrypoint, " ") != "/bin/probe" {
		t.Errorf("entrypoint %v", config.Config.Entrypoint)
	}
	files := map[string]*tar.Header{}
	tr := tar.NewReader(strings.NewReader(string(layer)))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = h
	}
	for name, want := range map[string]byte{"bin/": tar.TypeDir, "etc/": tar.TypeDir, "bin/probe": tar.TypeReg, "etc/hello": tar.TypeReg, "bin/sh": tar.TypeSymlink} {
		if h := files[name]; h == nil || h.Typeflag != want {
			t.Errorf("layer entry %s: %+v", name, h)
		}
	}
	if files["bin/probe"].Mode != 0o755 {
		t.Errorf("bin/probe mode %o", files["bin/probe"].Mode)
	}
	// Other content, other archive.
	img.Files[1].Data = []byte("changed\n")
	other, err := Archive(img)
	if err != nil || other == paths[0] {
		t.Errorf("changed content gave %q %v", other, err)
	}
	left, _ := os.ReadDir(os.Getenv("KEDGE_IMAGES_CACHE"))
	for _, e := range left {
		if strings.Contains(e.Name(), ".tmp.") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
}

func readTar(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		out[h.Name] = b
	}
}

func TestPauseIsStaticAndStopsOnSIGTERM(t *testing.T) {
	t.Setenv("KEDGE_IMAGES_CACHE", t.TempDir())
	bin, err := PauseBinary(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if files, err := BinaryFiles(bin, "/pause"); err != nil || len(files) != 1 {
		t.Errorf("pause links libraries: %+v %v", files, err)
	}
	cmd := exec.Command(bin)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	time.Sleep(200 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("pause exited by itself: %v", err)
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("pause on SIGTERM: %v", err)
		}
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("pause ignored SIGTERM")
	}
}

func TestBinaryFilesAddTheLibrariesLddNames(t *testing.T) {
	files, err := BinaryFiles("/bin/sh", "/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	var libc bool
	for _, f := range files[1:] {
		if strings.Contains(f.Path, "libc.so") {
			libc = true
		}
		if _, err := os.Stat(f.Source); err != nil {
			t.Errorf("%s: %v", f.Path, err)
		}
	}
	if !libc {
		t.Errorf("no libc among %+v", files)
	}
	if got := libraryPath("\tlinux-vdso.so.1 (0x00007ffd)"); got != "" {
		t.Errorf("vdso gave %q", got)
	}
	if got := libraryPath("\t/lib64/ld-linux-x86-64.so.2 (0x00007f)"); got != "/lib64/ld-linux-x86-64.so.2" {
		t.Errorf("loader gave %q", got)
	}
}

func TestNamesAreTheRunbooksDefaults(t *testing.T) {
	if KubeVersion != runbooks.DefaultKubernetesVersion || ImageRepository != runbooks.DefaultImageRepository || EtcdRef != runbooks.DefaultEtcdImage {
		t.Errorf("images name %s %s %s; runbooks %s %s %s", KubeVersion, ImageRepository, EtcdRef,
			runbooks.DefaultKubernetesVersion, runbooks.DefaultImageRepository, runbooks.DefaultEtcdImage)
	}
	if got := ControlPlaneRef("kube-apiserver"); got != runbooks.DefaultImageRepository+"/kube-apiserver:"+runbooks.DefaultKubernetesVersion {
		t.Errorf("kube-apiserver image %s", got)
	}
}
