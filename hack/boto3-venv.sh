#!/usr/bin/env bash
# Creates bin/boto3-venv, a Python virtualenv holding a pinned boto3 (the AWS
# SDK for Python, from PyPI), and prints the venv's python path on stdout
# (progress goes to stderr). e2e/gateway's TestBoto3ThroughGateway uses it as
# a second real S3 SDK beside aws-sdk-go-v2 and ClickHouse's.
#
# A second run is a no-op (hack/lib/pyvenv.sh says how, and what it needs).
set -euo pipefail
cd "$(dirname "$0")/.."

# boto3 and its dependencies, pinned so that every machine gets the same set
# (botocore wants python-dateutil < 3, which chdb's venv does not have).
REQUIREMENTS=(
  boto3==1.44.8
  botocore==1.44.8
  s3transfer==0.19.3
  jmespath==1.1.0
  python-dateutil==2.9.0.post0
  six==1.17.0
  urllib3==2.8.0
)

# shellcheck source=hack/lib/pyvenv.sh
. hack/lib/pyvenv.sh
pyvenv boto3-venv "a few MB" 'import boto3; boto3.client("s3", region_name="us-east-1")' "${REQUIREMENTS[@]}"
