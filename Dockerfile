# Kedge: one static binary (CLI, worker, webhook) in a small image.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /out/kedge ./cmd/kedge

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/kedge /usr/local/bin/kedge
ENTRYPOINT ["/usr/local/bin/kedge"]
CMD ["worker"]
