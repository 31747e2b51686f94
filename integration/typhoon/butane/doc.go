// Package butane reads a rendered Butane config (variant flatcar 1.0.0 or
// 1.1.0, or fcos 1.0.0 to 1.6.0), such as Typhoon's butane templates
// rendered by the sibling package tftemplate, and returns what Ignition
// would leave on the host's disk, so the test world can lay out a Typhoon
// host from Typhoon's own files.
//
// Parsing is strict, like the butane tool: a field the spec does not have
// is an error naming its path (storage.files[3].contnts) and line. Fields
// the spec has but this package does not reproduce (remote or compressed
// contents, append, numeric owners, disks and filesystems, most passwd
// fields, ...) are refused the same way with ErrUnsupported rather than
// dropped.
//
// What becomes a File:
//
//   - storage.directories: a directory, mode 0755 unless given.
//   - storage.files: contents.inline (no contents: an empty file), mode 0644
//     unless given.
//   - storage.links: a symbolic link to target.
//   - systemd.units: contents become /etc/systemd/system/NAME (0644),
//     dropins /etc/systemd/system/NAME.d/DROPIN (0644); mask: true a link
//     to /dev/null; enabled: true on a unit with contents the links
//     systemctl enable makes from its [Install] section (WantedBy= and
//     RequiredBy= as /etc/systemd/system/TARGET.wants|requires/NAME, Alias=
//     as /etc/systemd/system/ALIAS, each linking to the unit file; Also=
//     enables those units too).
//
// A unit enabled with no contents is one the OS ships (docker.service,
// containerd.service): its [Install] section is not known here, so it is
// listed in Config.Enable for the caller to enable; one with enabled: false
// is listed in Config.Disable. passwd.users are reported in Config.Users
// (name and SSH keys), not written.
//
// Owners and groups are names, root unless the config names another. The
// parents of each path are not listed: Ignition creates missing ones
// 0755, owned by root. Files are sorted by path, so a directory comes
// before what is in it.
//
// Assets joins terraform-render-bootstrap's assets the way Typhoon's
// ssh.tf does for the controllers' /home/core/assets file.
//
// It is test infrastructure only.
package butane
