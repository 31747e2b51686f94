package images

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Image is an image of one layer, described by the files it holds.
type Image struct {
	// Ref is the name the image is imported under, e.g.
	// registry.k8s.io/pause:3.10.
	Ref        string
	Entrypoint []string
	Cmd        []string
	Env        []string
	Files      []File
}

// File is one entry of an image's layer. Exactly one of Source, Data and
// Link says what it is.
type File struct {
	Path   string      // absolute path in the image
	Source string      // a file of this machine to copy (content and mode)
	Data   []byte      // literal content
	Mode   os.FileMode // mode of Data (default 0644)
	Link   string      // symlink target
}

// layerTime is every entry's modification time, so that the same files
// give the same layer, whoever builds it.
var layerTime = time.Unix(0, 0).UTC()

// formatVersion changes when the archive layout does, so that cached
// archives of an older layout are not used.
const formatVersion = "kedge-images/1"

// CacheDir is where built archives and binaries are kept:
// $KEDGE_IMAGES_CACHE, or kedge/images under the user's cache directory.
func CacheDir() (string, error) {
	if d := os.Getenv("KEDGE_IMAGES_CACHE"); d != "" {
		return d, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("images cache: %w", err)
	}
	return filepath.Join(base, "kedge", "images"), nil
}

// Archive returns a docker-archive tarball of img (one layer, its config
// and a manifest.json naming img.Ref), building it when the cache holds
// none for the same content. The cache key is a hash of the image's
// description and of every file's content, so a rebuilt binary gives a
// new archive. Safe to call concurrently, from several processes: one
// builds under a lock, and the archive appears under its name whole.
func Archive(img Image) (string, error) {
	if img.Ref == "" || !strings.Contains(img.Ref, ":") {
		return "", fmt.Errorf("image %q: a reference with a tag is required", img.Ref)
	}
	key, err := img.key()
	if err != nil {
		return "", err
	}
	dir, err := CacheDir()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, key+".tar")
	err = buildOnce(out, func(tmp string) error { return img.write(tmp) })
	if err != nil {
		return "", fmt.Errorf("image %s: %w", img.Ref, err)
	}
	return out, nil
}

// buildOnce makes out with build unless it exists: under an exclusive
// lock on out+".lock", build writes a temporary file named for this
// process, which is renamed to out when whole.
func buildOnce(out string, build func(tmp string) error) error {
	if _, err := os.Stat(out); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	lock, err := os.OpenFile(out+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", out, err)
	}
	defer func() { _ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) }()
	if _, err := os.Stat(out); err == nil {
		return nil
	}
	tmp := out + ".tmp." + strconv.Itoa(os.Getpid())
	defer os.Remove(tmp)
	if err := build(tmp); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}

// key hashes what the archive is made of.
func (img Image) key() (string, error) {
	h := sha256.New()
	desc, _ := json.Marshal(struct {
		Format, Ref, Arch    string
		Entrypoint, Cmd, Env []string
	}{formatVersion, img.Ref, runtime.GOARCH, img.Entrypoint, img.Cmd, img.Env})
	h.Write(desc)
	for _, f := range img.Files {
		fmt.Fprintf(h, "\x00%s\x00%s\x00%o\x00", f.Path, f.Link, f.mode())
		switch {
		case f.Source != "":
			in, err := os.Open(f.Source)
			if err != nil {
				return "", err
			}
			_, err = io.Copy(h, in)
			in.Close()
			if err != nil {
				return "", err
			}
		default:
			h.Write(f.Data)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func (f File) mode() os.FileMode {
	if f.Source != "" {
		if st, err := os.Stat(f.Source); err == nil {
			return st.Mode().Perm()
		}
	}
	if f.Mode == 0 {
		return 0o644
	}
	return f.Mode.Perm()
}

// write writes the docker-archive to path: the layer first to a file of
// its own (its digest names it in the config and the manifest), then the
// archive around it.
func (img Image) write(path string) error {
	layer := path + ".layer"
	defer os.Remove(layer)
	diffID, err := img.writeLayer(layer)
	if err != nil {
		return err
	}
	config, err := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"created":      layerTime.Format(time.RFC3339),
		"config": map[string]any{
			"Entrypoint": img.Entrypoint,
			"Cmd":        img.Cmd,
			"Env":        img.Env,
		},
		"rootfs": map[string]any{
			"type":     "layers",
			"diff_ids": []string{"sha256:" + diffID},
		},
	})
	if err != nil {
		return err
	}
	configSum := sha256.Sum256(config)
	configName := hex.EncodeToString(configSum[:]) + ".json"
	layerName := diffID + "/layer.tar"
	manifest, err := json.Marshal([]map[string]any{{
		"Config":   configName,
		"RepoTags": []string{img.Ref},
		"Layers":   []string{layerName},
	}})
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = errors.Join(
		addDir(tw, diffID),
		addFileFrom(tw, layerName, layer),
		addData(tw, configName, config, 0o644),
		addData(tw, "manifest.json", manifest, 0o644),
		tw.Close(),
	)
	return errors.Join(err, f.Sync(), f.Close())
}

// writeLayer writes the layer tar (every parent directory, then the
// files, in path order) and returns its sha256 in hex.
func (img Image) writeLayer(file string) (string, error) {
	f, err := os.Create(file)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	tw := tar.NewWriter(io.MultiWriter(f, h))
	files := append([]File(nil), img.Files...)
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	dirs := map[string]bool{}
	var errs []error
	for _, entry := range files {
		p := strings.TrimPrefix(path.Clean("/"+entry.Path), "/")
		for _, d := range parents(p) {
			if !dirs[d] {
				dirs[d] = true
				errs = append(errs, addDir(tw, d))
			}
		}
		switch {
		case entry.Link != "":
			errs = append(errs, tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: p, Linkname: entry.Link, Mode: 0o777, ModTime: layerTime}))
		case entry.Source != "":
			errs = append(errs, addFileFrom(tw, p, entry.Source))
		default:
			errs = append(errs, addData(tw, p, entry.Data, int64(entry.mode())))
		}
	}
	errs = append(errs, tw.Close())
	if err := errors.Join(errs...); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// parents lists the directories above p, outermost first.
func parents(p string) []string {
	var out []string
	for d := path.Dir(p); d != "." && d != "/"; d = path.Dir(d) {
		out = append([]string{d}, out...)
	}
	return out
}

func addDir(tw *tar.Writer, name string) error {
	return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: 0o755, ModTime: layerTime})
}

func addData(tw *tar.Writer, name string, data []byte, mode int64) error {
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: layerTime}); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}

func addFileFrom(tw *tar.Writer, name, source string) error {
	in, err := os.Open(source)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: int64(st.Mode().Perm()), Size: st.Size(), ModTime: layerTime}); err != nil {
		return err
	}
	_, err = io.Copy(tw, in)
	return err
}
