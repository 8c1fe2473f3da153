# syntax=docker/dockerfile:1
# One image for every role: `actiond api|policy|executor|web|migrate`.
#   docker build -t actiond --build-arg ACTIOND_GIT_COMMIT=$(git rev-parse HEAD) .
# Build stage: the workspace (Cargo.lock pinned), release profile, only the `actiond` binary.
FROM rust:1.95-bookworm AS build
WORKDIR /src
# `.git` stays out of the context: the commit `actiond version` prints comes in as an argument.
ARG ACTIOND_GIT_COMMIT=unknown
ENV ACTIOND_GIT_COMMIT=${ACTIOND_GIT_COMMIT}
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p actiond \
 && install -m 0755 target/release/actiond /usr/local/bin/actiond

# Runtime: Debian slim, CA certificates for provider APIs / OIDC over TLS, a fixed non-root uid
# (10001) so Kubernetes `runAsNonRoot` can verify it. The root filesystem can be read-only:
# actiond writes nothing but stdout/stderr, and the sealer its state directory
# /var/lib/actiond-sealer (mount a volume there; a new named volume takes its owner from here).
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 actiond \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin actiond \
 && install -d -o 10001 -g 10001 -m 0700 /var/lib/actiond-sealer
COPY --from=build /usr/local/bin/actiond /usr/local/bin/actiond
USER 10001:10001
ENTRYPOINT ["/usr/local/bin/actiond"]
CMD ["--help"]
