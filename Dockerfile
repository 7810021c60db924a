# First version: the gpubot command on a slim Python image, as a non-root user.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY bot bot
COPY handlers handlers
COPY sim sim
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
RUN useradd --uid 10001 --create-home gpubot
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/* && rm -rf /wheels
USER 10001
ENTRYPOINT ["gpubot"]
CMD ["sim", "--listen", "127.0.0.1:6443"]
