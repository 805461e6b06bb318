package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/distcache/distcache/internal/pki"
)

// listFlag collects a repeatable or comma-separated flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error {
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*l = append(*l, v)
		}
	}
	return nil
}

// runCerts issues a CA and the certificates a cache node, its peers and its
// tenants need, for running outside Kubernetes (on Kubernetes the operator
// issues them). An existing CA in the directory is reused.
func runCerts(args []string) error {
	fs := flag.NewFlagSet("certs", flag.ContinueOnError)
	dir := fs.String("dir", "certs", "output directory")
	var dns, ips, tenants, peers, nodes listFlag
	fs.Var(&dns, "server-dns", "DNS names for the server certificate (repeatable)")
	fs.Var(&ips, "server-ip", "IP addresses for the server certificate (repeatable)")
	fs.Var(&tenants, "tenant", "issue a client certificate for this tenant (repeatable)")
	fs.Var(&peers, "peer", "issue a peer client certificate for this node or gateway name (repeatable)")
	fs.Var(&nodes, "node", "issue node-NAME.crt: a server certificate (the server names above) that is also NAME's peer identity for calls to other nodes (repeatable)")
	validity := fs.Duration("validity", 365*24*time.Hour, "validity of the issued certificates")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		return err
	}
	ca, err := loadOrCreateCA(*dir, *validity)
	if err != nil {
		return err
	}
	var addrs []net.IP
	for _, s := range ips {
		ip := net.ParseIP(s)
		if ip == nil {
			return fmt.Errorf("--server-ip %q is not an IP address", s)
		}
		addrs = append(addrs, ip)
	}
	if len(dns) == 0 && len(addrs) == 0 {
		dns = listFlag{"localhost"}
		addrs = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	server, err := ca.IssueServer(firstOr(dns, "distcache"), dns, addrs, *validity)
	if err != nil {
		return err
	}
	if err := pki.WriteFiles(*dir, "server", server); err != nil {
		return err
	}
	issue := func(kind pki.Kind, names []string) error {
		for _, name := range names {
			leaf, err := ca.IssueClient(pki.Identity{Kind: kind, Name: name}, *validity)
			if err != nil {
				return err
			}
			if err := pki.WriteFiles(*dir, string(kind)+"-"+name, leaf); err != nil {
				return err
			}
		}
		return nil
	}
	for _, name := range nodes {
		leaf, err := ca.IssueServer(name, dns, addrs, *validity, pki.WithIdentity(pki.Identity{Kind: pki.KindPeer, Name: name}))
		if err != nil {
			return err
		}
		if err := pki.WriteFiles(*dir, "node-"+name, leaf); err != nil {
			return err
		}
	}
	if err := issue(pki.KindTenant, tenants); err != nil {
		return err
	}
	if err := issue(pki.KindPeer, peers); err != nil {
		return err
	}
	fmt.Printf("certificates written to %s\n", *dir)
	return nil
}

func loadOrCreateCA(dir string, validity time.Duration) (*pki.CA, error) {
	certPEM, err1 := os.ReadFile(filepath.Join(dir, "ca.crt"))
	keyPEM, err2 := os.ReadFile(filepath.Join(dir, "ca.key"))
	if err1 == nil && err2 == nil {
		return pki.LoadCA(certPEM, keyPEM)
	}
	if !errors.Is(err1, os.ErrNotExist) && err1 != nil {
		return nil, err1
	}
	ca, err := pki.NewCA("distcache CA", 10*validity)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), ca.CertPEM, 0o644); err != nil {
		return nil, err
	}
	return ca, os.WriteFile(filepath.Join(dir, "ca.key"), ca.KeyPEM, 0o600)
}

func firstOr(l []string, def string) string {
	if len(l) > 0 {
		return l[0]
	}
	return def
}
