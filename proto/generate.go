package pluginpb

// Regenerate with protoc 3.21.12 (Debian protobuf-compiler),
// protoc-gen-go v1.36.12 and protoc-gen-go-grpc (see docs/plugins.md).
//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative plugin.proto
