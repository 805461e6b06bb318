package node

// For the external tests.
const (
	ConfirmSettle     = confirmSettle
	ConfirmSlowUpload = confirmSlowUpload
)

// MarkDown marks member name down at s, as a request to it that just
// failed would.
func (s *Server) MarkDown(name string) { s.peers.down.MarkDown(name) }
