package main

import (
	"fmt"
	"strings"

	"github.com/distcache/distcache/internal/embed"
)

// With --cross-zone=OnMiss a node asks, on a miss, the chunk's owner in
// each other zone of the cache before S3, so it needs those zones' rings
// (internal/embed follows them): the keys of the ring ConfigMap for the
// zones of --zones, and files given as --zone-ring-files zone=path.

// parseZoneRingFiles parses --zone-ring-files (zone=path,...).
func parseZoneRingFiles(s string) ([]embed.ZoneRingFile, error) {
	var files []embed.ZoneRingFile
	seen := map[string]bool{}
	for _, item := range splitList(s) {
		zone, path, ok := strings.Cut(item, "=")
		zone, path = strings.TrimSpace(zone), strings.TrimSpace(path)
		if !ok || zone == "" || path == "" {
			return nil, fmt.Errorf("--zone-ring-files: %q is not zone=path", item)
		}
		if seen[zone] {
			return nil, fmt.Errorf("--zone-ring-files: zone %q given twice", zone)
		}
		seen[zone] = true
		files = append(files, embed.ZoneRingFile{Zone: zone, Path: path})
	}
	return files, nil
}
