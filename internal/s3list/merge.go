package s3list

import (
	"context"
	"slices"
	"strings"
)

// Held is a key whose newest version the cache holds and S3 may not have
// yet: an object (Object) or, Deleted, a delete S3 has not applied yet.
type Held struct {
	Object
	Deleted bool
}

// Request is what the client asked of the listing: its prefix and
// delimiter, its page size, and where it resumes (exclusive; "" from the
// start). Foreign is set when it resumes at a token of S3's own, whose
// position is unknown: then only held keys at or after the first entry of
// S3's page are merged.
type Request struct {
	Prefix, Delimiter string
	MaxKeys           int
	After             string
	Foreign           bool
}

// StillListed reports whether S3 has a key under prefix other than the
// ones given (held deletes): a common prefix of S3's page stays listed only
// then.
type StillListed func(ctx context.Context, prefix string, deleted []string) (bool, error)

// Merge changes page, S3's answer to q, into what S3 will answer once it
// has every held version: held objects are listed (with their own size,
// ETag and date), held deletes are not, in the key range the page covers.
// held must be under q.Prefix. The page keeps at most q.MaxKeys entries;
// when it is truncated, next is the entry the following page resumes
// after (where the caller's continuation points).
func Merge(ctx context.Context, page *Page, q Request, held []Held, still StillListed) (next string, err error) {
	upper, bounded := page.last()
	if q.MaxKeys <= 0 {
		return upper, nil // S3 lists nothing then, and so does the cache
	}
	lower, lowerIncl := q.After, false
	if q.Foreign {
		first, ok := page.first()
		if !ok {
			return upper, nil // nowhere to place held keys: S3's page stands
		}
		lower, lowerIncl = first, true
	}
	objects := make(map[string]Object, len(page.Contents))
	for _, o := range page.Contents {
		objects[o.Key] = o
	}
	prefixes := make(map[string]bool, len(page.CommonPrefixes))
	for _, c := range page.CommonPrefixes {
		prefixes[c.Prefix] = true
	}
	deletedUnder := map[string][]string{} // common prefix -> held deletes in it
	heldUnder := map[string]bool{}        // common prefixes with held objects
	for _, h := range held {
		entry, isPrefix := entryOf(q.Prefix, q.Delimiter, h.Key)
		switch {
		case entry < lower || (entry == lower && !lowerIncl):
			continue
		case bounded && entry > upper:
			continue
		}
		switch {
		case isPrefix && h.Deleted:
			deletedUnder[entry] = append(deletedUnder[entry], h.Key)
		case isPrefix:
			prefixes[entry] = true
			heldUnder[entry] = true
		case h.Deleted:
			delete(objects, h.Key)
		default:
			objects[h.Key] = h.Object
		}
	}
	for prefix, deleted := range deletedUnder {
		if !prefixes[prefix] || heldUnder[prefix] {
			continue
		}
		ok, err := still(ctx, prefix, deleted)
		if err != nil {
			return "", err
		}
		if !ok {
			delete(prefixes, prefix)
		}
	}
	page.set(objects, prefixes, q.MaxKeys)
	if !page.IsTruncated {
		return "", nil
	}
	if last, ok := page.Last(); ok {
		return last, nil
	}
	return upper, nil // every entry S3 gave was deleted: resume after them
}

// entryOf is what key (under prefix) is listed as: itself, or with a
// delimiter after the prefix, the common prefix that rolls it up. Object
// and multipart-upload listings group keys alike.
func entryOf(prefix, delimiter, key string) (entry string, isPrefix bool) {
	if delimiter == "" {
		return key, false
	}
	rest := key[len(prefix):]
	i := strings.Index(rest, delimiter)
	if i < 0 {
		return key, false
	}
	return key[:len(prefix)+i+len(delimiter)], true
}

// set makes the page's entries those given, sorted, at most max of them.
func (p *Page) set(objects map[string]Object, prefixes map[string]bool, max int) {
	type entry struct {
		name   string
		object bool
	}
	all := make([]entry, 0, len(objects)+len(prefixes))
	for k := range objects {
		all = append(all, entry{k, true})
	}
	for k := range prefixes {
		all = append(all, entry{k, false})
	}
	slices.SortFunc(all, func(a, b entry) int { return strings.Compare(a.name, b.name) })
	if len(all) > max {
		all = all[:max]
		p.IsTruncated = true
	}
	p.Contents, p.CommonPrefixes = p.Contents[:0], p.CommonPrefixes[:0]
	for _, e := range all {
		if e.object {
			p.Contents = append(p.Contents, objects[e.name])
		} else {
			p.CommonPrefixes = append(p.CommonPrefixes, CommonPrefix{e.name})
		}
	}
	if p.KeyCount != nil {
		n := len(all)
		p.KeyCount = &n
	}
}

// first is the page's first entry, key or common prefix.
func (p *Page) first() (string, bool) {
	var out string
	found := false
	for _, s := range p.entries() {
		if !found || s < out {
			out, found = s, true
		}
	}
	return out, found
}

// last is the page's last entry when S3 cut the page short: the held keys
// after it belong to later pages. ok is false for a page that ends the
// listing.
func (p *Page) last() (string, bool) {
	if !p.IsTruncated {
		return "", false
	}
	return p.Last()
}

// Last is the last entry of the page, key or common prefix, where the next
// page resumes.
func (p *Page) Last() (string, bool) {
	var out string
	found := false
	for _, s := range p.entries() {
		if s > out {
			out, found = s, true
		}
	}
	return out, found
}

func (p *Page) entries() []string {
	out := make([]string, 0, len(p.Contents)+len(p.CommonPrefixes))
	for _, o := range p.Contents {
		out = append(out, o.Key)
	}
	return append(out, p.Prefixes()...)
}
