//go:build tools

// Package seaweedfs pins the S3-compatible object store the test world runs.
package seaweedfs

import _ "github.com/seaweedfs/seaweedfs/weed"
