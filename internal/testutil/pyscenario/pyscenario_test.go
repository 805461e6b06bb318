package pyscenario

import (
	"os"
	"slices"
	"testing"
)

// A developer's AWS settings (variables, ~/.aws files) never reach a
// scenario; its target and CA bundle do.
func TestScenarioEnvLeavesOutTheDevelopersAWSSettings(t *testing.T) {
	environ := []string{"HOME=/home/dev", "PATH=/usr/bin", "AWS_PROFILE=work", "AWS_DEFAULT_REGION=eu-west-1",
		"AWS_ACCESS_KEY_ID=AKIA", "AWS_REQUEST_CHECKSUM_CALCULATION=when_required", "AWS_CONFIG_FILE=/home/dev/.aws/config"}
	env := scenarioEnv(environ, Target{Endpoint: "http://127.0.0.1:9000", AccessKey: "k", SecretKey: "s", Bucket: "b", CABundle: "/ca.pem"})
	for _, want := range []string{"HOME=/home/dev", "PATH=/usr/bin", "S3_ENDPOINT=http://127.0.0.1:9000", "S3_ACCESS_KEY=k",
		"S3_SECRET_KEY=s", "S3_BUCKET=b", "S3_REGION=us-east-1", "AWS_CA_BUNDLE=/ca.pem",
		"AWS_CONFIG_FILE=" + os.DevNull, "AWS_SHARED_CREDENTIALS_FILE=" + os.DevNull} {
		if !slices.Contains(env, want) {
			t.Errorf("%s missing from %q", want, env)
		}
	}
	for _, gone := range []string{"AWS_PROFILE=work", "AWS_DEFAULT_REGION=eu-west-1", "AWS_ACCESS_KEY_ID=AKIA",
		"AWS_REQUEST_CHECKSUM_CALCULATION=when_required", "AWS_CONFIG_FILE=/home/dev/.aws/config"} {
		if slices.Contains(env, gone) {
			t.Errorf("%s reached the scenario: %q", gone, env)
		}
	}
}
