"""The console script's commands: one module per command group. Each holds its flags, one
call into the package that does the work, and its exit codes."""
