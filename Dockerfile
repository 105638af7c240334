# syntax=docker/dockerfile:1
#
# pactd in a container: `docker compose up` (see docker-compose.yml) or
#   docker build -t pactd . && docker run -e DATABASE_URL=postgres://... -p 8080:8080 pactd
#
# The image runs `pactd serve` against an external PostgreSQL (DATABASE_URL). It carries no
# PostgreSQL server, so `pactd dev` and its private cluster are for running from source.

# ---- build ------------------------------------------------------------------------------------
FROM rust:1-bookworm AS builder

# The openssl crate (native-tls, josekit) builds against the system's OpenSSL.
RUN apt-get update \
    && apt-get install -y --no-install-recommends libssl-dev pkg-config \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /src
COPY . .

# Queries are checked without a database at build time; migrations are embedded from migrations/.
ENV SQLX_OFFLINE=true

# Cache mounts keep the crate registry and build artefacts between builds; the binary is copied
# out of the cached target directory because cache mounts are not part of the image.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p pactd \
    && cp target/release/pactd /usr/local/bin/pactd

# ---- run --------------------------------------------------------------------------------------
FROM debian:bookworm-slim

# ca-certificates: outgoing TLS (agents' JWKS); libssl3: the OpenSSL the binary links against.
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates libssl3 \
    && rm -rf /var/lib/apt/lists/*

# A fixed numeric uid, so that orchestrators can verify "runs as non-root" without /etc/passwd.
RUN groupadd --system --gid 10001 pactd \
    && useradd --system --uid 10001 --gid pactd --home-dir /app --no-create-home \
       --shell /usr/sbin/nologin pactd

WORKDIR /app
COPY --from=builder /usr/local/bin/pactd /usr/local/bin/pactd
# Owned by root and read-only to pactd: the server reads these, it never writes them.
COPY templates/ /app/templates/
COPY static/ /app/static/

# Inside a container the server must listen beyond loopback for the published port to reach it.
ENV PACTD_LISTEN=0.0.0.0:8080
EXPOSE 8080

USER 10001:10001
ENTRYPOINT ["pactd"]
CMD ["serve"]
