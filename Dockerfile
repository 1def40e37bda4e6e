# shoal's image: a slim Python base pinned by digest, the hash-locked dependencies in a venv, the
# shoal wheel, a non-root user. How it is built here without a container engine, how a team
# builds and publishes it, and how to refresh the pins: docs/image.md.
#   docker buildx build --platform linux/amd64,linux/arm64 -t REGISTRY/shoal:TAG --push .
# BASE is python:3.11.14-slim-bookworm, pinned by the digest of its multi-platform index: a tag can
# move, a digest cannot. `make image` (no engine) applies the same steps to a Debian bookworm rootfs.
ARG BASE=python:3.11.14-slim-bookworm@sha256:65a93d69fa75478d554f4ad27c85c1e69fa184956261b4301ebaf6dbb0a3543d

FROM ${BASE} AS build
WORKDIR /src
# The build backend too is installed from hashes, then used without build isolation.
COPY requirements/build.lock requirements/
RUN pip install --no-cache-dir --require-hashes -r requirements/build.lock
COPY pyproject.toml README.md ./
COPY operator ./operator
COPY plugins ./plugins
RUN pip wheel --no-cache-dir --no-deps --no-build-isolation --wheel-dir /wheels .

FROM ${BASE}
ENV PATH=/opt/shoal/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
COPY requirements/image.lock hack/image/install.sh /tmp/image/
COPY --from=build /wheels /wheels
RUN sh /tmp/image/install.sh
USER 65532:65532
EXPOSE 10259
ENTRYPOINT ["shoal"]
CMD ["run"]
