package node

// For the external tests.
const (
	ConfirmSettle     = confirmSettle
	ConfirmSlowUpload = confirmSlowUpload
)
