# syntax=docker/dockerfile:1
# console: the operators' web console (HTTP :8090).
# Build from the repository root:
#   docker build -f deploy/docker/console.Dockerfile -t llmgw/console:TAG .
# The build stage uses the Go version of go.mod (checked by deploy/copies_test.go);
# the binary is static and runs as the distroless nonroot user.
FROM golang:1.26.8-bookworm AS build
ENV CGO_ENABLED=0 GOOS=linux GOTOOLCHAIN=local GOFLAGS=-buildvcs=false
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    go build -trimpath -ldflags="-s -w" -o /out/console ./console/cmd/console

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/console /console
USER 65532:65532
ENTRYPOINT ["/console"]
