# OpenTalon as a small static image: the binary, CA certificates and an
# empty, private /data (mode 0700: the database, and the plugins' sockets
# and temporary files, since the image has no /tmp), run as a non-root
# user. Build:
#
#   docker build --build-arg VERSION=v1.2.0 -t opentalon .
#
# Run with a config that enables a chat platform (the console needs a
# terminal), the data in a volume and the server on port 7070:
#
#   docker run -d --name opentalon -v opentalon-data:/data \
#     -v "$PWD/config.yaml:/etc/opentalon/config.yaml:ro" \
#     -e OPENTALON_CONFIG=/etc/opentalon/config.yaml \
#     -e OPENTALON_API_KEY=... -e TELEGRAM_BOT_TOKEN=... -e ANTHROPIC_API_KEY=... \
#     -p 127.0.0.1:7070:7070 opentalon

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -tags grpcnotrace,nethttpomithttp2 -ldflags "-s -w -X main.Version=${VERSION}" -o /out/opentalon ./cmd/opentalon \
 && install -d -m 0700 /out/data

FROM scratch
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/opentalon /opentalon
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
# state.data_dir and server.listen of any config that leaves them out
# (the built-in default included); a server beyond loopback serves the
# status page and /metrics only with server.api_key, which
# OPENTALON_API_KEY gives the same way.
ENV HOME=/data OPENTALON_DATA_DIR=/data OPENTALON_LISTEN=0.0.0.0:7070
VOLUME ["/data"]
EXPOSE 7070
# The health check asks GET /healthz on server.listen: the image has no
# curl, so the binary asks it itself (opentalon healthcheck).
HEALTHCHECK --interval=30s --timeout=5s --start-period=15s --retries=3 CMD ["/opentalon", "healthcheck"]
# A stop lets answers in flight finish (queue.shutdown_grace, 30s).
STOPSIGNAL SIGTERM
ENTRYPOINT ["/opentalon"]
CMD ["run"]
