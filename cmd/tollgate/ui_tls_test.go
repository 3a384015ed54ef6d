package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/servertest"
)

// uiCert is a certificate and its key, self-signed or signed by a test CA
// (every TLS test of the package makes its certificates with uiIssue).
type uiCert struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	der  []byte
}

func uiIssue(t testing.TB, tmpl *x509.Certificate, parent *uiCert) *uiCert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(time.Hour)
	signer, parentCert := key, tmpl
	if parent != nil {
		signer, parentCert = parent.key, parent.cert
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parentCert, &key.PublicKey, signer)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &uiCert{cert: cert, key: key, der: der}
}

func (c *uiCert) writePEM(t testing.TB, dir, name string) (certPath, keyPath string) {
	t.Helper()
	certPath, keyPath = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	require.NoError(t, os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.der}), 0o600))
	kder, err := x509.MarshalECPrivateKey(c.key)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600))
	return certPath, keyPath
}

func (c *uiCert) tlsCert() tls.Certificate {
	return tls.Certificate{Certificate: [][]byte{c.der}, PrivateKey: c.key, Leaf: c.cert}
}

// TestUIBehindClientCertificates: under mTLS the dashboard is behind the
// same client certificates as the API: a client without a certificate gets
// no page (the handshake or the first read fails), one with a certificate
// signed by the client CA gets the page and its script.
func TestUIBehindClientCertificates(t *testing.T) {
	dir := t.TempDir()
	ca := uiIssue(t, &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "tollgate test CA"},
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}, nil)
	server := uiIssue(t, &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}, ca)
	client := uiIssue(t, &x509.Certificate{SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: "operator"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}, ca)
	caPath, _ := ca.writePEM(t, dir, "ca")
	certPath, keyPath := server.writePEM(t, dir, "server")

	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	withCert := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: roots, Certificates: []tls.Certificate{client.tlsCert()}}}}
	withoutCert := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}

	s := servertest.StartTLS(t, withCert, "--tls-cert", certPath, "--tls-key", keyPath, "--tls-client-ca", caPath)

	for _, path := range []string{"/ui/", "/ui/app.js", "/stats"} {
		resp, err := withoutCert.Get(s.URL + path)
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		require.Error(t, err, "%s without a client certificate", path)
		require.True(t, strings.Contains(err.Error(), "certificate") || strings.Contains(err.Error(), "tls"), "%s: %v", path, err)
	}

	resp, err := withCert.Get(s.URL + "/ui/")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(body), `<script src="app.js">`)
	resp, err = withCert.Get(s.URL + "/ui/app.js")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}
