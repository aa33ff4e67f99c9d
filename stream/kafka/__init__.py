"""The Kafka driver of the stream core: the worker, its consuming loop and topics. The only
place in `runwatch.stream` that imports a Kafka client (aiokafka) or Faust."""
