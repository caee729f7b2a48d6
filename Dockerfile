# syntax=docker/dockerfile:1
# Tollgate and the upstream simulator, built from this repository:
#   docker build -t tollgate .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/tollgate ./cmd/tollgate && \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/upstream-sim ./cmd/upstream-sim

# Alpine: small, with CA certificates for HTTPS providers and busybox wget
# for healthchecks.
FROM alpine:3.22
RUN apk add --no-cache ca-certificates tzdata && \
    adduser -D -H -u 10001 tollgate && \
    mkdir -p /var/lib/tollgate && chown tollgate:tollgate /var/lib/tollgate
COPY --from=build /out/tollgate /out/upstream-sim /usr/local/bin/
USER tollgate
WORKDIR /var/lib/tollgate
# The gateway's spool lives under the data directory: keep it on a volume.
ENV TOLLGATE_DATA_DIR=/var/lib/tollgate
EXPOSE 8080 8081
ENTRYPOINT ["tollgate"]
CMD ["--help"]
