# shoal's image: a slim Python base, the wheel and its dependencies, a non-root user.
# Build and push (no image is published; use a registry your cluster pulls from):
#   docker build -t REGISTRY/shoal:TAG . && docker push REGISTRY/shoal:TAG
#   helm install ... --set image.repository=REGISTRY/shoal --set image.tag=TAG
# (No image is built in this repository's CI: the development machine has no Docker engine.)
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY operator ./operator
COPY plugins ./plugins
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN groupadd --gid 65532 shoal \
 && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin shoal
COPY --from=build /wheels /wheels
RUN pip install --no-index --find-links /wheels shoal && rm -rf /wheels
USER 65532:65532
EXPOSE 10259
ENTRYPOINT ["shoal"]
CMD ["run"]
