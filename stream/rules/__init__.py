"""Built-in and custom alert rules: one module each, pure functions of state and time."""
