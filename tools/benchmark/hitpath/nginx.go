package hitpath

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/distcache/distcache/internal/freeport"
	"github.com/distcache/distcache/tools/benchmark/benchkit"
)

// nginxParams fill nginxConf.
type nginxParams struct {
	Dir                       string
	Root                      bool // the master runs as root: workers must too, to read Dir
	Workers                   int
	Port                      int // TLS with client certificates
	PlainPort                 int // plain HTTP, as S3 clients reach a proxy next to them
	ServerCert, ServerKey, CA string
	MinIO                     string // host:port
	Slice, CacheBytes         int64
}

// nginxConf is nginx as a TLS 1.3, client-certificate-verifying caching
// proxy in front of MinIO. Ranges are cached the standard way, with the
// slice module: every request is cut into slice-aligned subrequests (the
// slice = the cache's chunk size), each cached under its own key, so a
// 64 KiB range is served from the cached slice around it. Settings are the
// usual ones for serving bulk bytes: no access log, keep-alive with a high
// request limit, open_file_cache, an upstream keep-alive pool, sendfile
// without tcp_nopush (with it, on plain HTTP, every 64 KiB range answer
// waited 40 ms for the client's delayed ACK: p50 44 ms, measured).
//
// Two listeners share the cache: TLS 1.3 with client certificates (the
// node comparison) and plain HTTP (the gateway comparison: what one would
// put in front of S3 for ClickHouse). S3 clients sign their requests;
// nginx verifies no signature, drops it and reads MinIO anonymously, and
// keys slices by path and range only (S3 SDKs add ?x-id=GetObject).
var nginxConf = template.Must(template.New("nginx.conf").Parse(`daemon off;
master_process on;
{{if .Root}}user root root;
{{end}}worker_processes {{.Workers}};
pid {{.Dir}}/nginx.pid;
error_log {{.Dir}}/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path {{.Dir}}/tmp/body;
  proxy_temp_path {{.Dir}}/tmp/proxy;
  fastcgi_temp_path {{.Dir}}/tmp/fastcgi;
  uwsgi_temp_path {{.Dir}}/tmp/uwsgi;
  scgi_temp_path {{.Dir}}/tmp/scgi;
  sendfile on;
  tcp_nopush off;
  tcp_nodelay on;
  keepalive_timeout 300s;
  keepalive_requests 1000000;
  open_file_cache max=1024 inactive=300s;
  proxy_cache_path {{.Dir}}/cache levels=1:2 keys_zone=hits:16m max_size={{.CacheBytes}} inactive=1d use_temp_path=off;
  upstream minio {
    server {{.MinIO}};
    keepalive 64;
  }
  server {
    listen 127.0.0.1:{{.Port}} ssl;
    ssl_protocols TLSv1.3;
    ssl_certificate {{.ServerCert}};
    ssl_certificate_key {{.ServerKey}};
    ssl_client_certificate {{.CA}};
    ssl_verify_client on;
{{template "locations" .}}  }
  server {
    listen 127.0.0.1:{{.PlainPort}};
{{template "locations" .}}  }
}
{{define "locations"}}    location = /healthz {
      return 200 "ok\n";
    }
    location / {
      slice {{.Slice}};
      proxy_cache hits;
      proxy_cache_key $uri$slice_range;
      proxy_set_header Range $slice_range;
      proxy_set_header Authorization "";
      proxy_set_header X-Amz-Date "";
      proxy_set_header X-Amz-Content-Sha256 "";
      proxy_cache_valid 200 206 1d;
      proxy_ignore_headers Cache-Control Expires Set-Cookie Vary;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host {{.MinIO}};
      proxy_pass http://minio;
      add_header X-Cache-Status $upstream_cache_status always;
    }
{{end}}`))

// nginxProc is a running nginx (master and workers); Stop stops it.
type nginxProc struct {
	*benchkit.Process
	addr      string // TLS with client certificates
	plainAddr string // plain HTTP
	dir       string
}

// startNginx writes the configuration into dir, runs bin and waits until
// it answers over mTLS.
func startNginx(ctx context.Context, bin, dir string, p nginxParams) (*nginxProc, error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("nginx: %w; run hack/nginx.sh (Debian's nginx into bin/)", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o755); err != nil {
		return nil, err
	}
	addrs, err := freeport.Several(2)
	if err != nil {
		return nil, err
	}
	var ports [2]int
	for i, addr := range addrs {
		_, portStr, _ := net.SplitHostPort(addr)
		ports[i], _ = strconv.Atoi(portStr)
	}
	port := ports[0]
	p.Dir, p.Port, p.PlainPort, p.Workers, p.Root = dir, port, ports[1], runtime.NumCPU(), os.Geteuid() == 0
	var conf strings.Builder
	if err := nginxConf.Execute(&conf, p); err != nil {
		return nil, err
	}
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf.String()), 0o644); err != nil {
		return nil, err
	}
	proc, err := benchkit.StartProcess(bin, filepath.Join(dir, "stderr.log"), "nginx", nil,
		"-p", dir+"/", "-c", confPath, "-e", filepath.Join(dir, "error.log"))
	if err != nil {
		return nil, err
	}
	n := &nginxProc{Process: proc, addr: "127.0.0.1:" + strconv.Itoa(port), plainAddr: "127.0.0.1:" + strconv.Itoa(p.PlainPort), dir: dir}
	if err := n.waitReady(ctx, p); err != nil {
		n.Stop()
		return nil, err
	}
	return n, nil
}

// waitReady polls /healthz with a client certificate until nginx answers,
// and checks that a connection without one is refused.
func (n *nginxProc) waitReady(ctx context.Context, p nginxParams) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-n.Done():
			return fmt.Errorf("nginx exited: %s", n.log())
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		conn, err := net.DialTimeout("tcp", n.addr, time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nginx not listening on %s after 30s: %v\n%s", n.addr, err, n.log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkMTLS proves nginx verifies client certificates: /healthz answers
// with the tenant's certificate and refuses a connection without one.
func (n *nginxProc) checkMTLS(ctx context.Context, withCert *http.Client, caOnly *tls.Config) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+n.addr+"/healthz", nil)
	resp, err := withCert.Do(req)
	if err != nil {
		return fmt.Errorf("nginx /healthz with a client certificate: %w\n%s", err, n.log())
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("nginx /healthz: %s", resp.Status)
	}
	if resp.TLS == nil || resp.TLS.Version != tls.VersionTLS13 {
		return errors.New("nginx did not speak TLS 1.3")
	}
	noCert := &http.Client{Transport: &http.Transport{TLSClientConfig: caOnly}}
	defer noCert.CloseIdleConnections()
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, "https://"+n.addr+"/healthz", nil)
	if resp, err := noCert.Do(req); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return errors.New("nginx answered a client without a certificate")
		}
	}
	return nil
}

func (n *nginxProc) log() string {
	b, _ := os.ReadFile(filepath.Join(n.dir, "error.log"))
	s, _ := os.ReadFile(filepath.Join(n.dir, "stderr.log"))
	out := string(b) + string(s)
	if len(out) > 4096 {
		out = out[len(out)-4096:]
	}
	return out
}

// pids are the master's and its workers' process IDs.
func (n *nginxProc) pids() []int {
	return append([]int{n.Pid()}, childrenOf(n.Pid())...)
}
