# Sluice as a drop-in for the apache/kafka image: a static binary FROM scratch.
#
#   docker build -t sluice .
#   docker run -p 9092:9092 sluice          # advertises localhost:9092, as apache/kafka does
#
# The environment below is the apache/kafka image's defaults (its configureDefaults script), so a
# compose service that sets only some KAFKA_* variables gets the same values for the rest.
FROM rust:1-bookworm AS build
RUN rustup target add x86_64-unknown-linux-musl
WORKDIR /src
COPY . .
# No debug info in the image's binary (the repository's release profile keeps some for profiling).
ENV CARGO_PROFILE_RELEASE_DEBUG=0 \
    CARGO_PROFILE_RELEASE_STRIP=true
RUN cargo build --release --locked --target x86_64-unknown-linux-musl --bin sluice \
 && mkdir -p /out/data \
 && cp target/x86_64-unknown-linux-musl/release/sluice /out/sluice

FROM scratch
COPY --from=build /out/sluice /sluice
# The data directory, owned by uid 1000 like the apache/kafka image's appuser.
COPY --from=build --chown=1000:1000 /out/data /tmp/kraft-combined-logs
ENV CLUSTER_ID=5L6g3nShT-eMCtK--X86sw \
    KAFKA_NODE_ID=1 \
    KAFKA_LISTENER_SECURITY_PROTOCOL_MAP=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,PLAINTEXT_HOST:PLAINTEXT \
    KAFKA_LISTENERS=PLAINTEXT://localhost:29092,CONTROLLER://localhost:29093,PLAINTEXT_HOST://0.0.0.0:9092 \
    KAFKA_ADVERTISED_LISTENERS=PLAINTEXT://localhost:29092,PLAINTEXT_HOST://localhost:9092 \
    KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR=1 \
    KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS=0 \
    KAFKA_TRANSACTION_STATE_LOG_MIN_ISR=1 \
    KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR=1 \
    KAFKA_PROCESS_ROLES=broker,controller \
    KAFKA_CONTROLLER_QUORUM_VOTERS=1@localhost:29093 \
    KAFKA_INTER_BROKER_LISTENER_NAME=PLAINTEXT \
    KAFKA_CONTROLLER_LISTENER_NAMES=CONTROLLER \
    KAFKA_LOG_DIRS=/tmp/kraft-combined-logs
VOLUME ["/tmp/kraft-combined-logs"]
EXPOSE 9092
USER 1000:1000
# No shell in the image: the binary checks itself (ApiVersions + Metadata on its own listener).
HEALTHCHECK --interval=5s --timeout=5s --start-period=5s --retries=10 CMD ["/sluice", "health"]
ENTRYPOINT ["/sluice"]
