"""The Kafka adapter (shared/spec/kafka.md): the command topic in, the decision feed out.

- consumer.py: `gangplank.commands` through the application service, effectively once;
- relay.py: the transactional outbox to `gangplank.decisions` and `gangplank.commands.dlq`;
- runtime.py: `start_kafka(service, settings)`, used by service/bootstrap.py;
- messages.py: parsing, fingerprints, dead letters; asyncapi.py: the AsyncAPI document.
"""
