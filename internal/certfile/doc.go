// Package certfile reads certificates as Kedge finds them on hosts and
// endpoints (PEM files, kubeconfigs with an embedded client certificate)
// and describes them: subject, issuer, serial, end, and whether the end
// is within a threshold.
//
// It is pure: it parses bytes it is given and never reads a file or the
// network. host.cert-info (activities/sshhost) and tls.check
// (activities/tlsprobe) share it, so neither imports the other.
package certfile
