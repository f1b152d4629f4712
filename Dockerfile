# handshake in a container: build with
#   docker build -t REGISTRY/handshake:0.1.0 .
# The Kubernetes Job in deploy/kubernetes/ runs this image.

# Build stage. The crate's MSRV is 1.85; TLS is rustls on ring, so the image's C
# compiler is all it needs (no OpenSSL, no pkg-config).
FROM rust:1-slim-bookworm AS builder
WORKDIR /src
COPY . .
RUN cargo build --release --locked

# Runtime stage: the binary and the system's CA certificates (for https:// targets).
FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY --from=builder /src/target/release/handshake /usr/local/bin/handshake
# Runs as root on purpose: some of handshake's commands need raw sockets or network
# administration. Add a USER line if your use needs none of them.
ENTRYPOINT ["handshake"]
