# The image runs the package as pip installs it: the wheel is built from the sources in a first
# stage, and the final stage installs only that wheel and runs `gangplank` from an empty folder (the
# schema migrations ship inside the package). tests/test_package.py does the same with a fresh venv.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY service ./service
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /dist .

FROM python:3.11-slim
COPY --from=build /dist /dist
RUN pip install --no-cache-dir /dist/*.whl && rm -rf /dist \
    && useradd --system --create-home --home-dir /var/lib/gangplank gangplank
USER gangplank
WORKDIR /var/lib/gangplank
EXPOSE 8000
ENTRYPOINT ["gangplank"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8000"]
