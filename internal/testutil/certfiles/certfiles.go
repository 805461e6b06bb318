// Package certfiles writes the certificates a test's servers and clients
// read from disk: a CA, a server certificate for localhost and client
// certificates, as PEM files in one directory.
package certfiles

import (
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/pki"
)

// Write creates a CA named caName and writes into dir ca.crt, server.crt
// and server.key (localhost and 127.0.0.1), and name.crt and name.key for
// each client identity, all valid for an hour; it fails the test on any
// error. It returns the CA and the server certificate.
func Write(t testing.TB, dir, caName string, clients map[string]pki.Identity) (*pki.CA, *pki.Leaf) {
	t.Helper()
	ca, err := pki.NewCA(caName, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	server, err := ca.IssueServer("localhost", []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	leaves := map[string]*pki.Leaf{"server": server}
	for name, id := range clients {
		if leaves[name], err = ca.IssueClient(id, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	for name, l := range leaves {
		if err := pki.WriteFiles(dir, name, l); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), ca.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return ca, server
}
