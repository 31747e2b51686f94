// Command modprobe is the test world's stand-in for kmod's modprobe,
// installed on every test host. The hosts share the machine's kernel, so
// the stand-in never loads or removes anything: it answers as modprobe
// would on a host whose kernel is the machine's, and records each load
// on the host alone.
//
// A module is one the running kernel has when:
//
//   - /lib/modules/$(uname -r) exists (as on a real host): it is in that
//     directory's modules.builtin or modules.dep, or names one through
//     modules.alias — what the real modprobe reads;
//   - otherwise (a kernel built without modules, as on a test machine
//     with no /lib/modules): it is loaded (/proc/modules), has
//     /sys/module/NAME (built in with parameters or a version), or is one
//     of the few modules Kubernetes hosts load (br_netfilter, overlay,
//     nf_conntrack, ...) whose kernel option /proc/config.gz sets to y
//     (built in): the table in kernel.go names each module's option.
//
// Names are compared with '-' and '_' the same, as kmod does. Any other
// name fails as modprobe fails: "modprobe: FATAL: Module NAME not found
// in directory /lib/modules/RELEASE", exit 1 (silent with -q).
//
// Options: -a/--all (every argument a module), -n/--dry-run/--show (check
// only: nothing recorded), -q/--quiet, -v/--verbose (prints "insmod
// PATH" for a module not in the kernel, as modprobe -v does), --first-time (a module
// already in the kernel, built in included, fails "could not insert
// 'NAME': Module already in kernel"), and -- before the names. An option
// modprobe does not have is refused as modprobe refuses it ("modprobe:
// unrecognized option '--foo'", "modprobe: invalid option -- 'z'", exit
// 1); one it has that the stand-in does not implement (-r, -c, -C, -d,
// -S, -f, -i, -b, -R, -D, -s, -w, -V, -h, ...) and module parameters
// (NAME key=value) are refused naming the stand-in, exit 1: nothing is
// pretended. MODPROBE_OPTIONS and /etc/modprobe.d are not read.
//
// Each successful load (not a dry run) appends a line to
// /var/log/kedge-lab/modprobe.log on the host (its own /var/log):
//
//	TIME NAME STATE
//
// TIME is RFC 3339 (UTC), NAME the module's name with '-' as '_', STATE
// "builtin" (built into the kernel), "loaded" (already in /proc/modules)
// or "insmod:PATH" (a loadable module the real modprobe would insert;
// the stand-in does not). Tests read the log to see what a host loaded:
// lsmod and /proc/modules are the machine's.
//
// It is test infrastructure only.
package main
