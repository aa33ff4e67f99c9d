"""The embedded service (`runwatch serve`): one process, no Kafka."""
