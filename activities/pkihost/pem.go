package pkihost

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"slices"
)

// pemCerts is the certificates as PEM, in order.
func pemCerts(cs []*x509.Certificate) []byte {
	var b []byte
	for _, c := range cs {
		b = append(b, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	return b
}

// pemBlocks is every PEM block of the type in data.
func pemBlocks(data []byte, typ string) [][]byte {
	var out [][]byte
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return out
		}
		if typ == "" || b.Type == typ {
			out = append(out, b.Bytes)
		}
	}
}

// sameCerts: data holds exactly the certificates want, in any order.
func sameCerts(data []byte, want []*x509.Certificate) bool {
	var raws [][]byte
	for _, c := range want {
		raws = append(raws, c.Raw)
	}
	return sameSet(pemBlocks(data, "CERTIFICATE"), raws)
}

// samePEM: data holds exactly the PEM blocks of want, in any order.
func samePEM(data []byte, want [][]byte) bool {
	var raws [][]byte
	for _, w := range want {
		raws = append(raws, pemBlocks(w, "")...)
	}
	return sameSet(pemBlocks(data, ""), raws)
}

func sameSet(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.ContainsFunc(b, func(y []byte) bool { return bytes.Equal(x, y) }) {
			return false
		}
	}
	return true
}
