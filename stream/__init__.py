"""The stream core: run state, rules, engine and alert lifecycle (pure), plus drivers."""
