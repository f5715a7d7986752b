FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY service ./service
COPY migrations ./migrations
RUN pip install --no-cache-dir .
EXPOSE 8000
ENTRYPOINT ["gangplank"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8000"]
