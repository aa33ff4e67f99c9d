"""runwatch: event-sourced run state and alerting for LLM RL training clusters."""
