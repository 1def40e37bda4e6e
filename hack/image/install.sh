#!/bin/sh
# The image's one RUN step. The Dockerfile runs it, and so does the daemonless build
# (tools/image_build.py, `make image`) in a chroot of a Debian rootfs: one recipe, two builders.
# Inputs: /tmp/image/image.lock (hash-locked runtime dependencies) and /wheels/shoal-*.whl; when
# /wheels/deps exists (the daemonless build) the locked wheels come from there instead of PyPI.
set -eu
groupadd --gid 65532 shoal
useradd --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin shoal
python3.11 -m venv /opt/shoal
src=""
if [ -d /wheels/deps ]; then src="--no-index --find-links /wheels/deps"; fi
# Every dependency is pinned with its hashes and installed without resolving (--no-deps): a file
# whose hash is not in the lock fails the build.
# shellcheck disable=SC2086
/opt/shoal/bin/pip install --no-cache-dir --require-hashes --no-deps $src -r /tmp/image/image.lock
/opt/shoal/bin/pip install --no-cache-dir --no-deps --no-index /wheels/shoal-*.whl
rm -rf /wheels /tmp/image
