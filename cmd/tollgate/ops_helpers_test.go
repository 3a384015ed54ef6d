package main

import (
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
	ca := uiIssue(t, &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "tollgate test CA"},
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}, nil)
	p := &opsPKI{CA: filepath.Join(dir, "ca.pem")}
	if err := os.WriteFile(p.CA, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.der}), 0o600); err != nil {
		t.Fatal(err)
	}
	issue := func(serial int64, usage x509.ExtKeyUsage) *uiCert {
		return uiIssue(t, &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "tollgate test"},
			ExtKeyUsage: []x509.ExtKeyUsage{usage}, KeyUsage: x509.KeyUsageDigitalSignature,
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}, ca)
	}
	p.ServerCert, p.ServerKey = issue(2, x509.ExtKeyUsageServerAuth).writePEM(t, dir, "server")
	client := issue(3, x509.ExtKeyUsageClientAuth)
	p.ClientCert, p.ClientKey = client.writePEM(t, dir, "client")
	p.pool = x509.NewCertPool()
	p.pool.AddCert(ca.cert)
	p.client = client.tlsCert()
	return p
}

// Client trusts the CA and presents the client certificate.
func (p *opsPKI) Client() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: p.pool, Certificates: []tls.Certificate{p.client}, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}
