// Command docker is a test-host stand-in for `docker run` / `podman run`:
// it maps the image to a local program listed in /etc/kedge-lab/images
// (lines "IMAGE-PREFIX PROGRAM [ARGS...]") and execs it, so a systemd unit
// that runs a container really runs something. Unknown images sleep
// forever. It is test infrastructure only.
package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

const (
	imagesFile = "/etc/kedge-lab/images"
	stateDir   = "/run/container-standin"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: docker run|rm|stop|pull|ps ...")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "run":
		os.Exit(run(os.Args[2:]))
	case "rm", "stop", "kill":
		for _, a := range os.Args[2:] {
			if !strings.HasPrefix(a, "-") {
				kill(a)
			}
		}
	case "pull", "version", "info":
	case "ps":
		entries, _ := os.ReadDir(stateDir)
		for _, e := range entries {
			fmt.Println(strings.TrimSuffix(e.Name(), ".pid"))
		}
	default:
		fmt.Fprintf(os.Stderr, "container stand-in: %s is not supported\n", os.Args[1])
		os.Exit(2)
	}
}

// flags that take a value.
var valued = map[string]bool{
	"--name": true, "-v": true, "--volume": true, "-e": true, "--env": true, "--entrypoint": true,
	"--network": true, "--net": true, "--pid": true, "--mount": true, "-w": true, "--workdir": true,
	"--env-file": true, "--log-driver": true, "--ipc": true, "--user": true, "-u": true,
}

func run(args []string) int {
	env := os.Environ()
	name, entrypoint := "", ""
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			break
		}
		flag, val, hasVal := strings.Cut(a, "=")
		if valued[flag] && !hasVal && i+1 < len(args) {
			i++
			val, hasVal = args[i], true
		}
		switch flag {
		case "--name":
			name = val
		case "-e", "--env":
			if strings.Contains(val, "=") {
				env = append(env, val)
			} else if v, ok := os.LookupEnv(val); ok {
				env = append(env, val+"="+v)
			}
		case "--entrypoint":
			entrypoint = val
		}
	}
	if i >= len(args) {
		fmt.Fprintln(os.Stderr, "container stand-in: run needs an image")
		return 2
	}
	image, rest := args[i], args[i+1:]
	env = append(env, "KEDGE_LAB_IMAGE="+image)
	if entrypoint != "" {
		rest = append([]string{entrypoint}, rest...)
	}
	argv := []string{"/bin/sleep", "2147483647"}
	if prog := lookup(image); prog != nil {
		argv = append(prog, rest...)
	}
	if name != "" {
		_ = os.MkdirAll(stateDir, 0o755)
		_ = os.WriteFile(filepath.Join(stateDir, name+".pid"), []byte(strconv.Itoa(os.Getpid())), 0o644)
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		fmt.Fprintf(os.Stderr, "container stand-in: %v\n", err)
		return 127
	}
	err = syscall.Exec(path, argv, env)
	fmt.Fprintf(os.Stderr, "container stand-in: exec %s: %v\n", path, err)
	return 126
}

func lookup(image string) []string {
	f, err := os.Open(imagesFile)
	if err != nil {
		return nil
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		if strings.HasPrefix(image, fields[0]) {
			return fields[1:]
		}
	}
	return nil
}

func kill(name string) {
	p := filepath.Join(stateDir, name+".pid")
	data, err := os.ReadFile(p)
	if err != nil {
		return
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	_ = os.Remove(p)
}
