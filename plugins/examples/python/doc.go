// Package python holds textstats.py, an example plugin written in Python
// with Debian's python3-grpcio, and the test that runs it through the
// core's handshake. The Python stubs are generated from proto/plugin.proto
// at test time (grpc_python_plugin from protobuf-compiler-grpc).
package python
