package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
)

// prog is the name the stand-in runs as: docker or podman.
var prog = "docker"

func main() {
	if filepath.Base(os.Args[0]) == "podman" {
		prog = "podman"
	}
	os.Exit(dispatch(os.Args[1:]))
}

// usageError reports a command-line mistake as the real program does and
// returns its exit status.
func usageError(cmd string, err error) int {
	if prog == "podman" {
		fmt.Fprintf(os.Stderr, "Error: %v\nSee 'podman %s --help'\n", err, cmd)
		return 125
	}
	fmt.Fprintf(os.Stderr, "%v\nSee 'docker %s --help'.\n", err, cmd)
	if cmd == "run" {
		return 125
	}
	return 1
}

// daemonError reports what the daemon refused.
func daemonError(format string, args ...any) {
	if prog == "podman" {
		fmt.Fprintf(os.Stderr, "Error: "+format+"\n", args...)
		return
	}
	fmt.Fprintf(os.Stderr, "Error response from daemon: "+format+"\n", args...)
}

func dispatch(args []string) int {
	if len(args) == 0 {
		fmt.Fprintf(os.Stderr, "Usage: %s COMMAND\n", prog)
		return 125
	}
	if strings.HasPrefix(args[0], "-") {
		return usageError("", errUnknownFlag(args[0]))
	}
	cmd, rest := args[0], args[1:]
	if cmd == "image" || cmd == "container" {
		if len(rest) == 0 {
			return usageError(cmd, fmt.Errorf("%q requires a subcommand", cmd))
		}
		sub := rest[0]
		switch {
		case cmd == "image" && sub == "ls":
			cmd = "images"
		case cmd == "image" && (sub == "pull" || sub == "inspect"):
			cmd = sub
			if sub == "inspect" {
				cmd = "image inspect"
			}
		case cmd == "container" && (sub == "ls" || sub == "run" || sub == "rm" || sub == "stop" || sub == "kill" || sub == "logs"):
			cmd = map[string]string{"ls": "ps"}[sub]
			if cmd == "" {
				cmd = sub
			}
		default:
			return unknownCommand(cmd + " " + sub)
		}
		rest = rest[1:]
	}
	switch cmd {
	case "run":
		return run(rest)
	case "ps":
		return ps(rest)
	case "logs":
		return logs(rest)
	case "stop":
		return stop(rest)
	case "kill":
		return kill(rest)
	case "rm":
		return rm(rest)
	case "pull":
		return pull(rest)
	case "images":
		return images(rest)
	case "image inspect":
		return inspectImage(rest)
	case "version", "info":
		if _, _, err := noFlags.parse(rest); err != nil {
			return usageError(cmd, err)
		}
		fmt.Printf("%s (Kedge test world stand-in)\n", prog)
		return 0
	case "__supervise":
		return supervise(rest[0])
	case "__init":
		return initContainer(rest[0])
	}
	return unknownCommand(cmd)
}

func unknownCommand(cmd string) int {
	if prog == "podman" {
		fmt.Fprintf(os.Stderr, "Error: unrecognized command `podman %s`\nTry 'podman --help' for more information\n", cmd)
		return 125
	}
	fmt.Fprintf(os.Stderr, "docker: '%s' is not a docker command.\nSee 'docker --help'\n", cmd)
	return 1
}

// pull succeeds for an image in the local store, and fails as a registry
// that does not have the image makes it fail otherwise.
func pull(args []string) int {
	f, pos, err := pullSpec.parse(args)
	if err != nil {
		return usageError("pull", err)
	}
	if len(pos) != 1 {
		return usageError("pull", fmt.Errorf("\"%s pull\" requires exactly 1 argument", prog))
	}
	ref := pos[0]
	if !validRef(ref) {
		daemonError("invalid reference format")
		return 1
	}
	im, ok := findImage(ref)
	if !ok {
		name, _, _ := splitRef(ref)
		if prog == "podman" {
			fmt.Fprintf(os.Stderr, "Error: initializing source docker://%s: reading manifest: manifest unknown\n", ref)
			return 125
		}
		daemonError("pull access denied for %s, repository does not exist or may require 'docker login'", name)
		return 1
	}
	recordPull(ref)
	if f.has("quiet") {
		fmt.Println(ref)
		return 0
	}
	if prog == "podman" {
		fmt.Println(im.Digest)
		return 0
	}
	fmt.Printf("%s: Pulling from %s\nDigest: %s\nStatus: Image is up to date for %s\n%s\n", im.Tag, im.Name, im.Digest, ref, ref)
	return 0
}

func images(args []string) int {
	f, _, err := imagesSpec.parse(args)
	if err != nil {
		return usageError("images", err)
	}
	list, err := loadStore()
	if err != nil {
		daemonError("%v", err)
		return 1
	}
	if f.has("quiet") {
		for _, im := range list {
			fmt.Println(imageID(im)[:12])
		}
		return 0
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 8, 3, ' ', 0)
	fmt.Fprintln(w, "REPOSITORY\tTAG\tDIGEST\tIMAGE ID")
	for _, im := range list {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", im.Name, im.Tag, im.Digest, imageID(im)[:12])
	}
	w.Flush()
	return 0
}

// imageID is the image's ID: its digest's hex, or one made from its
// reference.
func imageID(im image) string {
	if h, ok := strings.CutPrefix(im.Digest, "sha256:"); ok {
		return h
	}
	return newID(im.Ref())
}

func inspectImage(args []string) int {
	f, pos, err := inspectSpec.parse(args)
	if err != nil {
		return usageError("image inspect", err)
	}
	if len(pos) == 0 {
		return usageError("image inspect", fmt.Errorf("\"%s image inspect\" requires at least 1 argument", prog))
	}
	var out []map[string]any
	rc := 0
	for _, ref := range pos {
		im, ok := findImage(ref)
		if !ok {
			if prog == "podman" {
				fmt.Fprintf(os.Stderr, "Error: %s: image not known\n", ref)
				rc = 125
			} else {
				fmt.Fprintf(os.Stderr, "Error: No such image: %s\n", ref)
				rc = 1
			}
			continue
		}
		var digests []string
		if im.Digest != "" {
			digests = []string{im.Name + "@" + im.Digest}
		}
		if format := f.last("format"); format != "" {
			r := strings.NewReplacer("{{.Id}}", "sha256:"+imageID(im), "{{.ID}}", "sha256:"+imageID(im),
				"{{.RepoTags}}", "["+im.Ref()+"]", "{{.RepoDigests}}", "["+strings.Join(digests, " ")+"]")
			fmt.Println(r.Replace(format))
			continue
		}
		out = append(out, map[string]any{"Id": "sha256:" + imageID(im), "RepoTags": []string{im.Ref()},
			"RepoDigests": digests, "Config": map[string]any{"Entrypoint": im.Entrypoint}, "Created": time.Time{}})
	}
	if f.last("format") == "" {
		b, _ := json.MarshalIndent(out, "", "    ")
		fmt.Println(string(b))
	}
	return rc
}

// PullLog, beside the image store, gets a line "TIME PROGRAM REFERENCE"
// for every pull: what tests check to see an image was pulled, and when.
func pullLog() string { return filepath.Join(filepath.Dir(storePath()), "pulls") }

func recordPull(ref string) {
	f, err := os.OpenFile(pullLog(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s %s %s\n", time.Now().UTC().Format(time.RFC3339Nano), prog, ref)
}
