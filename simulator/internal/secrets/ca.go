package secrets

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"sync"
	"time"

	"github.com/sandplane/sandplane/provider/clock"
)

const (
	caValidity   = 365 * 24 * time.Hour
	leafValidity = 30 * 24 * time.Hour
	// backdate lets a client whose clock runs a little behind accept a
	// certificate just minted.
	backdate = time.Hour
)

// authority is the simulator's own CA: made at start, its key never
// leaves the process, and it signs a leaf only for a host the proxy
// intercepts. Sandboxes trust its certificate.
type authority struct {
	clk  clock.Clock
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
	// leafKey is shared by every leaf: minting then costs one signature.
	leafKey *ecdsa.PrivateKey

	mu     sync.Mutex
	leaves map[string]*tls.Certificate
}

func newAuthority(clk clock.Clock) (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("ca key: %w", err)
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("leaf key: %w", err)
	}
	cert, der, err := selfSign(clk.Now(), key)
	if err != nil {
		return nil, err
	}
	return &authority{
		clk: clk, cert: cert, key: key, leafKey: leafKey,
		pem:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		leaves: map[string]*tls.Certificate{},
	}, nil
}

func selfSign(now time.Time, key *ecdsa.PrivateKey) (*x509.Certificate, []byte, error) {
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "sandplane simulator secrets CA", Organization: []string{"sandplane"}},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		// It signs leaves only, never another CA.
		MaxPathLenZero: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("ca certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	return cert, der, err
}

// leaf returns a certificate for host, minted once and again when the
// clock passes its expiry.
func (a *authority) leaf(host string) (*tls.Certificate, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.clk.Now()
	if c, ok := a.leaves[host]; ok && now.Before(c.Leaf.NotAfter) {
		return c, nil
	}
	c, err := a.mint(host, now)
	if err != nil {
		return nil, err
	}
	a.leaves[host] = c
	return c, nil
}

func (a *authority) mint(host string, now time.Time) (*tls.Certificate, error) {
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: host},
		NotBefore:    now.Add(-backdate),
		NotAfter:     minTime(now.Add(leafValidity), a.cert.NotAfter),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ip := net.ParseIP(host); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &a.leafKey.PublicKey, a.key)
	if err != nil {
		return nil, fmt.Errorf("leaf certificate for %s: %w", host, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: a.leafKey, Leaf: leaf}, nil
}

func newSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("serial: %w", err)
	}
	return n, nil
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
