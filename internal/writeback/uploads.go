package writeback

import (
	"cmp"
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/distcache/distcache/internal/chunk"
)

// MinPartSize is the smallest part S3 takes but for the last one: a held
// upload's parts go to S3 as they came, so the same rule holds here.
const MinPartSize = 5 << 20

// MultipartETag is the ETag S3 gives a multipart upload of parts with
// these MD5 sums: the MD5 of the sums, a dash and the number of parts.
func MultipartETag(sums [][]byte) string {
	h := md5.New()
	for _, s := range sums {
		h.Write(s)
	}
	return fmt.Sprintf(`"%s-%d"`, hex.EncodeToString(h.Sum(nil)), len(sums))
}

// Errors of Uploads.
var (
	ErrNoSuchUpload = errors.New("no such multipart upload")
	ErrInvalidPart  = errors.New("a part named is not uploaded, or of another ETag")
)

// Uploads are the multipart uploads into held keys under way on this node:
// each a directory of its parts (synced files), until it is completed
// (into one held version, written to the journal) or aborted. They are not
// copied to other nodes before completion: an upload is lost with its
// node, as an upload to S3 can fail, and the client starts it again.
type Uploads struct {
	dir string

	mu   sync.Mutex
	used int64 // bytes of parts on disk
}

// Upload is a multipart upload under way.
type Upload struct {
	ID          string        `json:"id"`
	Name        Name          `json:"name"`
	ContentType string        `json:"contentType,omitempty"`
	Headers     chunk.Headers `json:"headers,omitempty"` // what S3 is to store with the object besides
	Created     time.Time     `json:"created"`
}

// Part is an uploaded part.
type Part struct {
	Number int    `json:"number"`
	Size   int64  `json:"size"`
	ETag   string `json:"etag"` // quoted MD5, as S3 answers UploadPart
	MD5    []byte `json:"md5"`
}

// uploadIDPrefix marks the upload IDs of held uploads.
const uploadIDPrefix = "distcache-"

// OpenUploads opens (creating) the uploads kept in dir.
func OpenUploads(dir string) (*Uploads, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	u := &Uploads{dir: dir}
	ids, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		parts, _ := u.Parts(id.Name())
		for _, p := range parts {
			u.used += p.Size
		}
	}
	return u, nil
}

// Used is the bytes of parts on disk.
func (u *Uploads) Used() int64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.used
}

// Create starts an upload of n, which S3 is to store with contentType and
// headers.
func (u *Uploads) Create(n Name, contentType string, headers chunk.Headers, now time.Time) (Upload, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return Upload{}, err
	}
	up := Upload{ID: uploadIDPrefix + hex.EncodeToString(b[:]), Name: n, ContentType: contentType, Headers: headers, Created: now.UTC()}
	data, err := json.Marshal(up)
	if err != nil {
		return Upload{}, err
	}
	dir := filepath.Join(u.dir, up.ID)
	if err := os.Mkdir(dir, 0o750); err != nil {
		return Upload{}, err
	}
	if err := writeSynced(filepath.Join(dir, "upload.json"), data); err != nil {
		return Upload{}, err
	}
	return up, syncDir(u.dir)
}

// Get is upload id of n (ErrNoSuchUpload if there is none, or it is of
// another object).
func (u *Uploads) Get(id string, n Name) (Upload, error) {
	if !validUploadID(id) {
		return Upload{}, ErrNoSuchUpload
	}
	data, err := os.ReadFile(filepath.Join(u.dir, id, "upload.json"))
	if err != nil {
		return Upload{}, ErrNoSuchUpload
	}
	var up Upload
	if err := json.Unmarshal(data, &up); err != nil || up.Name != n {
		return Upload{}, ErrNoSuchUpload
	}
	return up, nil
}

// List is the uploads under way into tenant's bucket with keys under
// prefix, in no order.
func (u *Uploads) List(tenant, bucket, prefix string) []Upload {
	dirs, err := os.ReadDir(u.dir)
	if err != nil {
		return nil
	}
	var out []Upload
	for _, d := range dirs {
		if !validUploadID(d.Name()) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(u.dir, d.Name(), "upload.json"))
		var up Upload
		if err != nil || json.Unmarshal(data, &up) != nil {
			continue // being created or removed
		}
		if up.Name.Tenant == tenant && up.Name.Bucket == bucket && strings.HasPrefix(up.Name.Key, prefix) {
			out = append(out, up)
		}
	}
	return out
}

func validUploadID(id string) bool {
	rest, ok := strings.CutPrefix(id, uploadIDPrefix)
	_, err := hex.DecodeString(rest)
	return ok && err == nil && len(rest) == 32
}

// PutPart stores part number of upload id (size bytes of body), replacing
// an earlier upload of the same number, as S3 does.
func (u *Uploads) PutPart(id string, number int, body io.Reader, size int64) (Part, error) {
	dir := filepath.Join(u.dir, id)
	f, err := os.CreateTemp(dir, "part-*.tmp")
	if err != nil {
		return Part{}, ErrNoSuchUpload
	}
	old, _ := u.part(id, number) // read before the new body replaces the old one
	base := filepath.Join(dir, strconv.Itoa(number))
	p := Part{Number: number, Size: size}
	err = commitTemp(f, base+".data", (*os.File).Sync, func(w io.Writer) error {
		h := md5.New()
		n, err := io.Copy(io.MultiWriter(w, h), io.LimitReader(body, size+1))
		if err == nil && n != size {
			err = ErrBadBody
		}
		p.MD5 = h.Sum(nil)
		return err
	})
	p.ETag = `"` + hex.EncodeToString(p.MD5) + `"`
	var meta []byte
	if err == nil {
		meta, err = json.Marshal(p)
	}
	if err == nil {
		err = writeSynced(base+".json", meta)
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		return Part{}, err
	}
	u.mu.Lock()
	u.used += size - old.Size
	u.mu.Unlock()
	return p, nil
}

func (u *Uploads) part(id string, number int) (Part, error) {
	data, err := os.ReadFile(filepath.Join(u.dir, id, strconv.Itoa(number)+".json"))
	if err != nil {
		return Part{}, err
	}
	var p Part
	if err := json.Unmarshal(data, &p); err != nil {
		return Part{}, err
	}
	fi, err := os.Stat(filepath.Join(u.dir, id, strconv.Itoa(number)+".data"))
	if err != nil || fi.Size() != p.Size {
		return Part{}, fmt.Errorf("part %d of %s: body missing or of another size", number, id)
	}
	return p, nil
}

// Parts are the parts of upload id, by number.
func (u *Uploads) Parts(id string) ([]Part, error) {
	names, err := os.ReadDir(filepath.Join(u.dir, id))
	if err != nil {
		return nil, ErrNoSuchUpload
	}
	var out []Part
	for _, d := range names {
		if num, ok := strings.CutSuffix(d.Name(), ".json"); ok {
			n, err := strconv.Atoi(num)
			if err != nil {
				continue
			}
			if p, err := u.part(id, n); err == nil {
				out = append(out, p)
			}
		}
	}
	slices.SortFunc(out, func(a, b Part) int { return cmp.Compare(a.Number, b.Number) })
	return out, nil
}

// Chosen checks the parts a completion names (number and ETag, in order)
// against those uploaded and returns them.
func (u *Uploads) Chosen(id string, numbers []int, etags []string) ([]Part, error) {
	out := make([]Part, len(numbers))
	for i, n := range numbers {
		p, err := u.part(id, n)
		if err != nil || strings.Trim(etags[i], `"`) != strings.Trim(p.ETag, `"`) {
			return nil, fmt.Errorf("%w: part %d", ErrInvalidPart, n)
		}
		out[i] = p
	}
	return out, nil
}

// Open reads the parts given one after the other.
func (u *Uploads) Open(id string, parts []Part) (io.ReadCloser, error) {
	files := make([]*os.File, 0, len(parts))
	readers := make([]io.Reader, 0, len(parts))
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	for _, p := range parts {
		f, err := os.Open(filepath.Join(u.dir, id, strconv.Itoa(p.Number)+".data"))
		if err != nil {
			closeAll()
			return nil, err
		}
		files = append(files, f)
		readers = append(readers, io.LimitReader(f, p.Size))
	}
	return readCloser{io.MultiReader(readers...), closeAll}, nil
}

type readCloser struct {
	io.Reader
	close func()
}

func (r readCloser) Close() error { r.close(); return nil }

// Remove ends upload id (completed or aborted), its parts deleted.
func (u *Uploads) Remove(id string) {
	if !validUploadID(id) {
		return
	}
	parts, _ := u.Parts(id)
	_ = os.RemoveAll(filepath.Join(u.dir, id))
	u.mu.Lock()
	for _, p := range parts {
		u.used -= p.Size
	}
	u.mu.Unlock()
}

// Sweep removes the uploads created before deadline (abandoned) and
// returns how many.
func (u *Uploads) Sweep(deadline time.Time) int {
	ids, err := os.ReadDir(u.dir)
	if err != nil {
		return 0
	}
	n := 0
	for _, d := range ids {
		data, err := os.ReadFile(filepath.Join(u.dir, d.Name(), "upload.json"))
		var up Upload
		if err == nil && json.Unmarshal(data, &up) == nil && !up.Created.Before(deadline) {
			continue
		}
		if info, err := d.Info(); err == nil && info.ModTime().After(deadline) && up.ID == "" {
			continue // being created
		}
		u.Remove(d.Name())
		if !validUploadID(d.Name()) {
			_ = os.RemoveAll(filepath.Join(u.dir, d.Name()))
		}
		n++
	}
	return n
}
