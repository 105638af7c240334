# syntax=docker/dockerfile:1
#
# pactd in a container: `docker compose up` (see docker-compose.yml) or
#   docker build -t pactd . && docker run -e DATABASE_URL=postgres://... -p 8080:8080 pactd
#
# The image runs `pactd serve` against an external PostgreSQL (DATABASE_URL or DATABASE_URL_FILE)
# with the master key in a file (PACTD_MASTER_KEY_FILE; `pactd keys init-master-key` makes it once).
# It carries no PostgreSQL server, so `pactd dev` and its private cluster are for running from
# source. Every setting is listed in docs/configuration.md.

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
# `sharing=locked`: two builds at once wait for each other instead of unpacking the same crates
# into one cache (cargo's own lock lives outside the mount).
RUN --mount=type=cache,target=/usr/local/cargo/registry,sharing=locked \
    --mount=type=cache,target=/src/target,sharing=locked \
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
# Templates and static files are compiled into the binary; nothing else is needed at run time.

# The master key's directory, owned by pactd alone. A named volume mounted here starts as a copy of
# it (owner and mode included), so the key file made by `pactd keys init-master-key` is readable by
# uid 10001 only.
RUN mkdir -p /var/lib/pactd/keys \
    && chown -R 10001:10001 /var/lib/pactd \
    && chmod 0700 /var/lib/pactd /var/lib/pactd/keys

# Inside a container the server must listen beyond loopback for the published port to reach it.
ENV PACTD_LISTEN=0.0.0.0:8080
EXPOSE 8080

# `pactd healthcheck` asks the server's /readyz on loopback (the port comes from PACTD_LISTEN) and
# exits 0 on 200: healthy means serving and reaching the database. No curl is needed in the image.
HEALTHCHECK --interval=10s --timeout=6s --start-period=30s --retries=3 \
    CMD ["pactd", "healthcheck", "--timeout", "5"]

USER 10001:10001
ENTRYPOINT ["pactd"]
CMD ["serve"]
