#!/bin/sh
# release.sh builds the release binaries: static (CGO_ENABLED=0; the
# SQLite driver is pure Go), stripped, with the version embedded
# (`opentalon version` prints it), for linux/amd64 and linux/arm64, and
# a SHA256SUMS-<version> file beside them.
#
#   scripts/release.sh v1.2.0     # dist/opentalon-v1.2.0-linux-amd64, ...-arm64
#   scripts/release.sh            # version from `git describe`
#
# OUT (default dist) is the output directory; PLATFORMS (default
# "linux/amd64 linux/arm64") the GOOS/GOARCH pairs.
set -eu
cd "$(dirname "$0")/.."
VERSION=${1:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
OUT=${OUT:-dist}
PLATFORMS=${PLATFORMS:-linux/amd64 linux/arm64}
case "$VERSION" in
*[!A-Za-z0-9._+-]*) echo "release.sh: version \"$VERSION\" may hold only letters, digits and . _ + -" >&2; exit 2 ;;
esac
mkdir -p "$OUT"
names=""
for p in $PLATFORMS; do
	os=${p%/*}
	arch=${p#*/}
	name="opentalon-$VERSION-$os-$arch"
	# grpcnotrace leaves out gRPC's request tracing (golang.org/x/net/trace,
	# which pulls in html/template and keeps ~4.5 MB of methods alive);
	# nethttpomithttp2 leaves out net/http's own HTTP/2 (0.5 MB and part of
	# every start): the platforms' and providers' APIs are called over
	# HTTP/1.1 with kept-alive connections, and gRPC plugins keep their own
	# HTTP/2.
	CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -tags grpcnotrace,nethttpomithttp2 \
		-ldflags "-s -w -X main.Version=$VERSION" -o "$OUT/$name" ./cmd/opentalon
	names="$names $name"
	echo "$OUT/$name"
done
# shellcheck disable=SC2086 # names is a list
(cd "$OUT" && sha256sum $names > "SHA256SUMS-$VERSION")
echo "$OUT/SHA256SUMS-$VERSION"
