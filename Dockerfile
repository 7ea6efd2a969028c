# syntax=docker/dockerfile:1
#
# weft: build the binary (cgo on, for the CPU backend's SIMD kernels), then
# run it as a non-root user on a minimal glibc base.
#
#   docker build -t weft .
#   docker run --rm --stop-timeout 40 -p 50051:50051 -p 9090:9090 \
#       -v $PWD/models:/models:ro weft serve --model /models/model.gguf
#
# The entrypoint is the weft binary and CMD is "serve", so arguments after
# the image name are a weft command line ("serve --model ...", "version",
# "tokenize ..."). The listen addresses come from the environment below
# (every serve flag has a WEFT_ variable; a flag on the command line wins),
# so they survive a replaced CMD. Configure through -e WEFT_... rather than
# flags where the health check must follow: it reads the same variables
# (WEFT_ADDR for the port, WEFT_TLS_CERT for TLS).
#
# Stopping: SIGTERM drains in-flight streams for --drain-timeout (30 s by
# default), longer than Docker's default 10 s stop timeout; give
# `docker run --stop-timeout 40`, compose `stop_grace_period: 40s` or
# Kubernetes `terminationGracePeriodSeconds: 40` (deploy/ has examples).
#
# Without --model the built-in random-weight model is served (gibberish,
# for smoke tests only).

# The build stage's Debian release matches the runtime base's (bookworm,
# glibc 2.36): a cgo binary needs a libc at least as new as the one it was
# linked against.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=1 go build -trimpath -ldflags="-s -w" -o /out/weft ./cmd/weft

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/weft /weft
USER nonroot:nonroot
ENV WEFT_ADDR=0.0.0.0:50051 \
    WEFT_HTTP_ADDR=0.0.0.0:8080 \
    WEFT_METRICS_ADDR=0.0.0.0:9090
EXPOSE 50051 8080 9090
# The binary probes its own gRPC health service (NOT_SERVING while loading
# and while draining) at WEFT_ADDR (a wildcard host is probed on loopback),
# with TLS when WEFT_TLS_CERT is set; no shell or extra binary is needed.
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
    CMD ["/weft", "healthcheck"]
# SIGTERM: health flips, no new streams, in-flight ones get --drain-timeout.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/weft"]
CMD ["serve"]
