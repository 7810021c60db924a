# gpubot: `gpubot serve` on python:3.11-slim, as a non-root user with a read-only-friendly layout.
#
#   docker build -t REGISTRY/gpubot:0.1.0 .
#
# The build stage makes gpubot's wheel and installs it, with its dependencies, into a virtualenv; the runtime
# stage copies only that virtualenv, so no compiler, pip cache or source tree ends up in the image.

FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY bot bot
COPY handlers handlers
COPY sim sim
RUN pip wheel --no-deps --wheel-dir /wheels . \
 && python -m venv /opt/gpubot \
 && /opt/gpubot/bin/pip install /wheels/gpubot-*.whl

FROM python:3.11-slim AS runtime
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
