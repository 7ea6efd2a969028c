# syntax=docker/dockerfile:1
#
# weft: build the binary (cgo on, for the CPU backend's SIMD kernels), then
# run it as a non-root user on a minimal glibc base.
#
#   docker build -t weft .
#   docker run --rm -p 50051:50051 -p 9090:9090 -v $PWD/models:/models:ro \
#       weft serve --model /models/model.gguf
#
# Without --model the built-in random-weight model is served (gibberish,
# for smoke tests only).

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=1 go build -trimpath -ldflags="-s -w" -o /out/weft ./cmd/weft

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/weft /weft
USER nonroot:nonroot
EXPOSE 50051 9090
# The binary probes its own gRPC health service (NOT_SERVING while loading
# and while draining); no shell or extra probe binary is needed.
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
    CMD ["/weft", "healthcheck", "--addr", "127.0.0.1:50051"]
# SIGTERM: health flips, no new streams, in-flight ones get --drain-timeout.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/weft"]
CMD ["serve", "--addr", "0.0.0.0:50051", "--metrics-addr", "0.0.0.0:9090"]
