# codemode serve in a container: small, non-root, stateless Streamable HTTP on :8000.
#
#   docker build -t codemodekit .                       # Python sources only
#   docker build --build-arg WITH_NODE=true -t codemodekit:node .   # + node/npm for npx sources
#   docker run --rm -p 127.0.0.1:8000:8000 -e CODEMODE_TOKEN=... \
#     -v "$PWD/codemode.toml:/config/codemode.toml:ro" codemodekit
#
# The token is required: the container binds 0.0.0.0, and codemode refuses a non-loopback
# bind without one. See docs/operations.md and deploy/kubernetes/.
ARG PYTHON_VERSION=3.11

FROM python:${PYTHON_VERSION}-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
RUN python -m venv /opt/codemode \
 && /opt/codemode/bin/pip install --no-cache-dir --disable-pip-version-check ".[metrics,otel]"

FROM python:${PYTHON_VERSION}-slim
ARG WITH_NODE=false
RUN if [ "$WITH_NODE" = "true" ]; then \
      apt-get update \
      && apt-get install -y --no-install-recommends nodejs npm \
      && rm -rf /var/lib/apt/lists/*; \
    fi \
 && useradd --uid 10001 --user-group --create-home --shell /usr/sbin/nologin codemode
COPY --from=build /opt/codemode /opt/codemode
ENV PATH=/opt/codemode/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
USER 10001:10001
WORKDIR /config
EXPOSE 8000
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s \
  CMD ["python", "-c", "import urllib.request as u; u.urlopen('http://127.0.0.1:8000/healthz', timeout=2)"]
ENTRYPOINT ["codemode", "serve", "-c", "/config/codemode.toml", "--transport", "http", \
            "--host", "0.0.0.0", "--port", "8000", "--auth-token-env", "CODEMODE_TOKEN", \
            "--stateless", "--public-health", "--metrics", "--drain-timeout", "25"]
