// Package blobtest is the conformance test every core.BlobStore passes:
// the files under <data_dir>/blobs and a blob storage plugin alike.
package blobtest
