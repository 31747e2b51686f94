# syntax=docker/dockerfile:1
# Kedge: one static binary (CLI, worker, codec server, webhook) in a
# distroless image. deploy/compose_test.go checks what this file names.
FROM golang:1.26.8 AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-buildvcs=false
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    go build -trimpath -ldflags "-s -w" -o /out/kedge ./cmd/kedge \
 && mkdir -p /out/state

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/kedge /usr/local/bin/kedge
# Where the worker keeps what runbooks write for operators (kubeconfigs
# from bootstrap); a volume in docker-compose.yml.
COPY --from=build --chown=65532:65532 /out/state /var/lib/kedge
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/kedge"]
CMD ["worker"]
