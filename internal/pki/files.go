package pki

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// WriteFiles writes l to dir/name.crt (mode 0644) and dir/name.key (mode
// 0600), creating dir (0700) if needed. Each file is replaced atomically
// (temporary file, fsync, rename), the key first, so a reader never sees a
// half-written file; a reader that sees the new key with the old certificate
// must retry, as ServerTLSConfig and ClientTLSConfig do.
func WriteFiles(dir string, name string, l *Leaf) error {
	if l == nil {
		return errors.New("pki: nil leaf")
	}
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, `/\`) {
		return fmt.Errorf("pki: invalid file name %q", name)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(dir, name+".key"), l.KeyPEM, 0o600); err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(dir, name+".crt"), l.CertPEM, 0o644)
}

func writeFileAtomic(path string, data []byte, perm os.FileMode) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	if err = f.Chmod(perm); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	return nil
}
