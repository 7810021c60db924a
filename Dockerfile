# gpubot: `gpubot serve` on python:3.11-slim, as a non-root user with a read-only-friendly layout.
#
#   docker build -t REGISTRY/gpubot:0.1.0 .
#
# The build stage installs uv from the package registry, then gpubot and exactly the dependencies pinned in
# uv.lock into a virtualenv, with bytecode compiled; the runtime stage copies only that virtualenv, so no
# compiler, uv, cache or source tree ends up in the image. The simulator (sim/) is not copied, so the
# installed gpubot has none: `gpubot sim` and `gpubot demo` say so and exit 2.
#
# The base is pinned by digest, so two builds of one commit get the same system libraries; the tag stays
# for people and for update bots. Digest of python:3.11-slim (the multi-arch index) as published in public
# Dockerfiles pinned around 2026-08-25; check and refresh it with
#   docker buildx imagetools inspect python:3.11-slim

FROM python:3.11-slim@sha256:9c900dea9e8fb7e16277c179b555cc72d29a352dbc33cff48ad5a0412fd5bfc7 AS build
ARG UV_VERSION=0.13.9
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    UV_PYTHON_DOWNLOADS=never UV_PROJECT_ENVIRONMENT=/opt/gpubot UV_COMPILE_BYTECODE=1 UV_LINK_MODE=copy
RUN pip install "uv==${UV_VERSION}"
WORKDIR /src
# The dependencies first, from the lock alone, so a change to gpubot's code reuses this layer.
COPY pyproject.toml uv.lock ./
RUN uv sync --locked --no-dev --no-install-project
COPY README.md ./
COPY bot bot
COPY handlers handlers
RUN uv sync --locked --no-dev --no-editable

FROM python:3.11-slim@sha256:9c900dea9e8fb7e16277c179b555cc72d29a352dbc33cff48ad5a0412fd5bfc7 AS runtime
# Numeric ids, so Kubernetes' runAsNonRoot can verify them without reading /etc/passwd.
RUN groupadd --gid 10001 gpubot \
 && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin gpubot
COPY --from=build /opt/gpubot /opt/gpubot
# Bytecode was compiled at install time; the root filesystem is read-only in the cluster.
ENV PATH=/opt/gpubot/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 GPUBOT_HEALTH_PORT=8080
USER 10001:10001
EXPOSE 8080
# slim has no curl: ask /healthz with the standard library; any error or non-2xx status exits non-zero.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ.get('GPUBOT_HEALTH_PORT', '8080') + '/healthz', timeout=4)"]
ENTRYPOINT ["gpubot"]
CMD ["serve"]
