# syntax=docker/dockerfile:1
# extproc: the Envoy ext_proc server (gRPC, health :9101).
# Build from the repository root:
#   docker build -f deploy/docker/extproc.Dockerfile -t llmgw/extproc:TAG .
# The build stage uses the Go version of go.mod (checked by deploy/copies_test.go);
# the binary is static and runs as the distroless nonroot user.
FROM golang:1.26.8-bookworm AS build
ENV CGO_ENABLED=0 GOOS=linux GOTOOLCHAIN=local GOFLAGS=-buildvcs=false
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    go build -tags vtprotobuf -trimpath -ldflags="-s -w" -o /out/extproc ./extproc/cmd/extproc

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/extproc /extproc
USER 65532:65532
ENTRYPOINT ["/extproc"]
