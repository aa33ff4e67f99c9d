"""Development and demonstration tools: the local Kafka broker (jars, broker, TLS), the
simulated cluster, the bundled scenarios and the demo. No production role imports these."""
