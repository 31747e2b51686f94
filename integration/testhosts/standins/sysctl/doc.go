// Command sysctl is the test world's stand-in for procps-ng's sysctl (4.0),
// installed on every test host. The hosts share the machine's kernel and
// network namespace, so the stand-in never writes /proc/sys: a setting is
// checked as the kernel would take it and recorded on the host alone, in
// /var/lib/kedge-lab/sysctl.conf (the host's own /var/lib), as
// sysctl.conf lines (KEY = VALUE, one a key, the last setting kept). A
// read answers the recorded value when this host set one, else the
// machine's from /proc/sys.
//
// It parses its command line as procps does (glibc getopt_long: options
// anywhere, clustered, abbreviated) and does what procps does with it:
//
//   - KEY reads (KEY = VALUE; -n the value only, -b without its newline,
//     -N the name only); a directory reads every key under it; -a/-A/-X
//     every key, -r EXPRESSION only the names it matches (POSIX ERE).
//   - KEY=VALUE, or -w KEY=VALUE, writes. A key is dotted
//     (net.ipv4.conf.all.rp_filter) or slashed (net/ipv4/conf/all/rp_filter),
//     its first separator saying which, the other one standing for itself
//     (net.ipv4.conf.eth0/1.rp_filter is the eth0.1 interface's).
//   - -p FILE... (-f, --load; -pFILE, --load=FILE; none: /etc/sysctl.conf;
//     FILE a glob, - standard input) reads sysctl.conf lines: # and ;
//     comments, -KEY = VALUE (a failure to set it is ignored), KEY with
//     glob characters (net.ipv4.conf.*.rp_filter) set on every key it
//     matches that no other line names, -KEY alone excluding a key from
//     the globs; --system does so for every *.conf of /etc/sysctl.d,
//     /run/sysctl.d, /usr/local/lib/sysctl.d, /usr/lib/sysctl.d and
//     /lib/sysctl.d (the first of a name winning, in name order), then
//     /etc/sysctl.conf, ignoring unknown keys.
//   - -q writes without printing, -e ignores unknown keys, --dry-run
//     prints what it would set and records nothing, -o and -x do
//     nothing, -h and -d print the usage, -V a version.
//
// A key that is not under /proc/sys fails as procps fails: "sysctl: cannot
// stat /proc/sys/KEY: No such file or directory", exit 1 (a glob matching
// nothing sets nothing, silently). A key that is read-only or a directory
// is refused ("setting key …: Operation not permitted", exit 0, as
// procps). Not root: "permission denied on key …", exit 1. A key whose
// value is a list of integers takes only integers, no more of them than it
// has ("setting key …: Invalid argument", exit 1), recorded as the kernel
// prints them (tab-separated); the kernel's own bounds are not known to
// the stand-in. Exit codes add up for reads and are or-ed for writes, as
// in procps. An unknown option is refused as procps refuses it: getopt's
// message ("sysctl: unrecognized option '--foo'"), the usage on standard
// output, nothing done, exit 0.
//
// It is test infrastructure only.
package main
