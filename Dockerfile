# runwatch: one image for every role (worker, sink, serve, notify, scrape, ...).
#   docker build -t runwatch .
#   docker run --rm runwatch worker --kafka kafka:9092 --metrics-port 9464
# torch is not installed (only the rank-status helpers in training jobs use it).

FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# a C compiler for the worker's native parts (setup.py; optional: without one, their Python)
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
 && rm -rf /var/lib/apt/lists/*
RUN python -m venv /opt/runwatch
COPY pyproject.toml setup.py README.md ./
COPY runwatch ./runwatch
COPY emitters ./emitters
COPY stream ./stream
COPY store ./store
COPY examples ./examples
RUN /opt/runwatch/bin/pip install ".[kafka,store,slack,metrics]"

FROM python:3.11-slim
ENV PATH=/opt/runwatch/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN groupadd --system --gid 10001 runwatch \
 && useradd --system --uid 10001 --gid runwatch --home-dir /home/runwatch --create-home runwatch
COPY --from=build /opt/runwatch /opt/runwatch
COPY dashboards /usr/share/runwatch/dashboards
USER 10001:10001
WORKDIR /home/runwatch
EXPOSE 9464 8787
ENTRYPOINT ["runwatch"]
CMD ["--help"]
