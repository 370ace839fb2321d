# The agent's image for config/manager's DaemonSet: the one unitlet binary
# at /unitlet, and a shell for the init container that installs it on the
# host (host systemd runs `unitlet exec` from there). Not built in this
# repository's CI: its machines run no container engine.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o /unitlet .

FROM debian:bookworm-slim
COPY --from=build /unitlet /unitlet
ENTRYPOINT ["/unitlet"]
