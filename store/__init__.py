"""DuckDB history: schema, sink, queries and backtests."""
