package writeback

// Bodies of held versions: written (inline in their record, or to a file
// of their own, synced), summed as S3 will sum them, and read back.

import (
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// writeBody writes the body to the version's .data file and syncs it,
// returning its MD5.
func (j *Journal) writeBody(e *Entry, body io.Reader) (string, error) {
	f, err := os.CreateTemp(j.dir, fileBase(e)+".data.*.tmp") // copies of one version may arrive together
	if err != nil {
		return "", err
	}
	var sum string
	err = commitTemp(f, j.path(e, ".data"), fdatasync, func(w io.Writer) (err error) {
		sum, err = copySummed(w, body, e.Size, e.Parts)
		return err
	}) // the rename is synced with its record (the directory)
	if err != nil {
		return "", err
	}
	return sum, nil
}

// copySummed copies exactly size bytes of body to w and returns the ETag
// S3 gives them: their MD5, or with parts (their sizes, adding up to size)
// the multipart ETag of those parts. Any other length is ErrBadBody.
func copySummed(w io.Writer, body io.Reader, size int64, parts []int64) (string, error) {
	multipart := len(parts) > 0
	if !multipart {
		parts = []int64{size}
	}
	var total int64
	sums := make([][]byte, len(parts))
	for i, n := range parts {
		h := md5.New()
		got, err := io.Copy(io.MultiWriter(w, h), io.LimitReader(body, n))
		if err != nil {
			return "", err
		}
		if got != n {
			return "", ErrBadBody
		}
		total += n
		sums[i] = h.Sum(nil)
	}
	if extra, err := io.Copy(io.Discard, io.LimitReader(body, 1)); err != nil {
		return "", err
	} else if extra != 0 || total != size {
		return "", ErrBadBody
	}
	if !multipart {
		return `"` + hex.EncodeToString(sums[0]) + `"`, nil
	}
	return MultipartETag(sums), nil
}

// writeSynced writes b to path through a synced temporary file.
func writeSynced(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	return commitTemp(f, path, (*os.File).Sync, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// commitTemp fills f, a new temporary file, with write, syncs it with
// sync, closes it and renames it to path (the directory is the caller's to
// sync); on any error it removes f instead.
func commitTemp(f *os.File, path string, sync func(*os.File) error, write func(io.Writer) error) error {
	tmp := f.Name()
	err := write(f)
	if err == nil {
		err = sync(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Body is a held version's body, read from the journal's files.
type Body struct {
	*io.SectionReader
	f *os.File
}

// OpenBody opens the body of version e, held here, for reading. It stays
// readable after the version is superseded or persisted (its file is
// only unlinked). A version no longer held is fs.ErrNotExist.
func (j *Journal) OpenBody(e Entry) (*Body, error) {
	if e.Op != OpPut {
		return nil, fmt.Errorf("version %d of %s is a delete", e.Version, e.Key)
	}
	j.mu.Lock()
	defer j.mu.Unlock() // its file is not removed meanwhile
	held, p, ok := j.heldLocked(e.Name, e.Version)
	if !ok || held.Op != OpPut {
		return nil, fmt.Errorf("version %d of %s: %w", e.Version, e.Key, fs.ErrNotExist)
	}
	name := j.path(held, ".data")
	if p.seg != 0 {
		name = j.log.path(p.seg)
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	return &Body{SectionReader: io.NewSectionReader(f, p.off, held.Size), f: f}, nil
}
