# syntax=docker/dockerfile:1
# One image for both roles: `fleetmark serve` (the hub, the default command) and
# `fleetmark agent run` (charts/fleetmark-agent). Build from the repository root:
#
#   docker build -t ghcr.io/fleetmark/fleetmark:0.1.0 .
#
# The final stage has no compiler and no build files: the first stage builds every wheel, the
# second installs them, from a bind mount of the first stage, so no wheel is left in a layer.
# It runs as UID/GID 65532 and writes only to its data folder (/var/lib/fleetmark), HOME
# (/home/fleetmark) and /tmp, so the root file system can be mounted read-only: give those
# three a volume or a tmpfs each.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS wheels
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY hub ./hub
COPY agent ./agent
COPY scheduler_core ./scheduler_core
COPY dashboards ./dashboards
COPY migrations ./migrations
# The hub's server and the agent, with every dependency, as wheels.
RUN pip wheel --wheel-dir /wheels ".[hub,agent]"

FROM ${PYTHON_IMAGE}
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG CREATED=unknown
LABEL org.opencontainers.image.title="fleetmark" \
      org.opencontainers.image.description="Deployment observability hub for GitOps fleets: the hub and its agent" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/fleetmark/fleetmark" \
      org.opencontainers.image.url="https://github.com/fleetmark/fleetmark"

# git (with ssh and the CA bundle) for the harvest and the scheduler; nothing else. The
# packages are the base image's Debian release's, so their versions are pinned by it.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install --yes --no-install-recommends git openssh-client ca-certificates \
    && rm -rf /var/lib/apt/lists/*

RUN groupadd --system --gid 65532 fleetmark \
    && useradd --system --uid 65532 --gid 65532 --home-dir /home/fleetmark --create-home \
        --shell /usr/sbin/nologin fleetmark \
    && install --directory --owner 65532 --group 65532 --mode 0750 /var/lib/fleetmark

RUN --mount=type=bind,from=wheels,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links /wheels "fleetmark[hub,agent]==${VERSION}"

# Production mode: the hub refuses to start without a token secret of its own
# (FLEETMARK_TOKEN_SECRET or FLEETMARK_TOKEN_SECRET_FILE) and every page needs a token.
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/home/fleetmark \
    FLEETMARK_MODE=production \
    FLEETMARK_DATA_DIR=/var/lib/fleetmark \
    FLEETMARK_HOST=0.0.0.0 \
    FLEETMARK_PORT=8080 \
    FLEETMARK_LOG_FORMAT=json

USER 65532:65532
WORKDIR /home/fleetmark
VOLUME ["/var/lib/fleetmark"]
EXPOSE 8080
# No HEALTHCHECK: the hub (/readyz on 8080) and the agent (/readyz on 8081) answer on
# different ports; compose and the charts probe each role where it listens.
ENTRYPOINT ["fleetmark"]
CMD ["serve"]
