// Command docker is the test world's container runtime stand-in, installed
// on every test host as both `docker` and `podman`. It is as strict as the
// real programs for everything it accepts, and refuses the rest, so a unit
// or runbook that works against it has a fair chance on a real host.
//
// Subcommands: run, ps, logs, stop, kill, rm, pull, images, image inspect
// (image ls, image pull), version, info. Anything else is refused as the
// real program refuses it ("docker: 'foo' is not a docker command.";
// podman: "Error: unrecognized command"), and so is every flag a
// subcommand does not know ("unknown flag: --foo", exit 125 for run).
//
// # Images
//
// There is no registry in the test world. A host's local image store is
// the file /var/lib/kedge-lab/image-store, seeded by the test harness
// (integration/testhosts, images.go), one image a line:
//
//	REFERENCE DIGEST PROGRAM [ARGS...]
//
// REFERENCE is NAME:TAG (a NAME alone means NAME:latest); DIGEST is
// sha256:HEX, or "-" when the image has none. The image answers to
// NAME:TAG, NAME@DIGEST and NAME:TAG@DIGEST, nothing else: no prefix
// matching, no default registry. `pull` and `run` of any other reference
// fail as they do against a registry that does not have it. PROGRAM
// [ARGS...] is the image's entrypoint and stands for everything in the
// image: `--entrypoint NAME` runs PROGRAM ARGS... NAME (a multi-call
// program, as busybox is). Lines starting with # are comments.
//
// # Containers
//
// `run` starts the container's process in its own mount namespace whose
// root is a fresh tmpfs holding only:
//
//   - the image's userland, standing for the image's files: the host's
//     /usr, /bin, /sbin and /lib* read-only (/lib/modules hidden), and
//     /etc with passwd, group, nsswitch.conf, hosts, hostname and
//     resolv.conf copied in;
//   - /etc/kedge-lab read-only: the test world's own settings (the kubelet
//     simulator's image map and node IP), which stand for what an image
//     would know;
//   - /proc, /sys (read-only unless --privileged), /dev (the host's with
//     --privileged, else null, zero, full, random, urandom, tty, pts and
//     a tmpfs shm), empty /tmp, /run, /var and /root;
//   - each -v/--volume SRC:DST[:OPTS] bound at DST (ro when asked).
//
// So a host path that was not mounted is not there for the program. The
// container shares the host's network and PID namespaces whatever
// --network or --pid say (only "host" is accepted for either); its
// environment is PATH, HOME, HOSTNAME, KEDGE_LAB_IMAGE (the image
// reference) and what -e/--env/--env-file give, not the caller's.
//
// State, per container, in /run/container-standin/ID/: config.json, pid,
// exit and log. `run` in the foreground waits for the process, copies its
// output to its own and to the log, and exits with its status; `-d`
// prints the ID and leaves a detached supervisor doing the same. --rm
// removes the container when it ends; a name stays taken until then
// ("Conflict. The container name ... is already in use").
//
// KEDGE_LAB_IMAGE_STORE and KEDGE_LAB_CONTAINER_STATE move the store file
// and the state directory, for the stand-in's own tests.
//
// It is test infrastructure only and must never be installed on a real
// host.
package main
