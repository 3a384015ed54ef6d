package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/servertest"
)

// opsLine is one JSON log line of the server, its attributes by key.
type opsLine map[string]any

func (l opsLine) str(key string) string {
	v, _ := l[key].(string)
	return v
}

func (l opsLine) num(key string) float64 {
	v, _ := l[key].(float64)
	return v
}

// opsLines parses the server's log so far (JSON lines; others skipped).
func opsLines(s *servertest.Server) []opsLine {
	var out []opsLine
	for _, raw := range strings.Split(s.Logs(), "\n") {
		var l opsLine
		if json.Unmarshal([]byte(raw), &l) == nil {
			out = append(out, l)
		}
	}
	return out
}

// opsWaitLog waits until a log line with this msg satisfies match (nil:
// any) and returns it.
func opsWaitLog(t testing.TB, s *servertest.Server, msg string, match func(opsLine) bool) opsLine {
	t.Helper()
	deadline := time.Now().Add(obsWait)
	for {
		for _, l := range opsLines(s) {
			if l.str("msg") == msg && (match == nil || match(l)) {
				return l
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line %q matching within %v; logs:\n%s", msg, obsWait, s.Logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// opsPKI is a CA, a server certificate for 127.0.0.1 and a client
// certificate, written as PEM files in a temp dir.
type opsPKI struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey string
	pool                                             *x509.CertPool
	client                                           tls.Certificate
}

func opsNewPKI(t testing.TB) *opsPKI {
	t.Helper()
	dir := t.TempDir()
	p := &opsPKI{
		CA: filepath.Join(dir, "ca.pem"), ServerCert: filepath.Join(dir, "server.pem"), ServerKey: filepath.Join(dir, "server-key.pem"),
		ClientCert: filepath.Join(dir, "client.pem"), ClientKey: filepath.Join(dir, "client-key.pem"),
	}
	caKey := opsKey(t)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "tollgate test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	opsWritePEM(t, p.CA, "CERTIFICATE", caDER)
	issue := func(serial int64, usage x509.ExtKeyUsage, certPath, keyPath string) {
		key := opsKey(t)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "tollgate test"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			ExtKeyUsage: []x509.ExtKeyUsage{usage}, KeyUsage: x509.KeyUsageDigitalSignature,
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kb, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		opsWritePEM(t, certPath, "CERTIFICATE", der)
		opsWritePEM(t, keyPath, "EC PRIVATE KEY", kb)
	}
	issue(2, x509.ExtKeyUsageServerAuth, p.ServerCert, p.ServerKey)
	issue(3, x509.ExtKeyUsageClientAuth, p.ClientCert, p.ClientKey)
	p.pool = x509.NewCertPool()
	p.pool.AddCert(ca)
	if p.client, err = tls.LoadX509KeyPair(p.ClientCert, p.ClientKey); err != nil {
		t.Fatal(err)
	}
	return p
}

// Client trusts the CA and presents the client certificate.
func (p *opsPKI) Client() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: p.pool, Certificates: []tls.Certificate{p.client}, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

func opsKey(t testing.TB) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func opsWritePEM(t testing.TB, path, typ string, der []byte) {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
