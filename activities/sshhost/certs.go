package sshhost

import (
	"context"
	"fmt"
	"time"

	"github.com/pkg/sftp"

	"kedge.dev/kedge/internal/certfile"

	"kedge.dev/kedge/actions/host"
)

// CertInfo reports when the certificates in files on the host end
// (host.cert-info). A missing file is reported, not an error.
func (a *Activities) CertInfo(ctx context.Context, in host.CertInfoInput) (host.CertInfoResult, error) {
	res, err := a.certInfo(ctx, in)
	return res, toTemporal(err)
}

func (a *Activities) certInfo(ctx context.Context, in host.CertInfoInput) (host.CertInfoResult, error) {
	var res host.CertInfoResult
	if len(in.Paths) == 0 {
		return res, invalid("paths: name at least one file")
	}
	threshold := certfile.DefaultThreshold
	if in.Threshold != "" {
		d, err := time.ParseDuration(in.Threshold)
		if err != nil || d < 0 {
			return res, invalid(fmt.Sprintf("threshold %q is not a duration", in.Threshold))
		}
		threshold = d
	}
	for _, p := range in.Paths {
		if err := checkPath(p); err != nil {
			return res, err
		}
	}
	files := map[string]*remoteFile{}
	err := a.Pool.WithSFTP(ctx, in.Target, func(c *sftp.Client) error {
		for _, p := range in.Paths {
			f, err := readIfExists(c, p, maxCompareSize)
			if err != nil {
				return err
			}
			files[p] = f
		}
		return nil
	})
	if err != nil {
		return res, a.fileErr(in.Target, "read", in.Paths[0], err)
	}
	now := time.Now()
	for _, p := range in.Paths {
		cf := host.CertFile{Path: p}
		if f := files[p]; f != nil {
			certs, err := certfile.Parse(f.data)
			if err != nil {
				return res, invalid(fmt.Sprintf("%s on %s: %v", p, in.Target.Name(), err))
			}
			d := certfile.Describe(certs[0], now, threshold)
			cf = host.CertFile{Path: p, Exists: true, Subject: d.Subject, Issuer: d.Issuer, Serial: d.Serial, NotAfter: d.NotAfter, Due: d.Due}
			res.Due = res.Due || d.Due
			if res.Earliest == "" || d.NotAfter < res.Earliest {
				res.Earliest = d.NotAfter
			}
		}
		res.Files = append(res.Files, cf)
	}
	return res, nil
}
