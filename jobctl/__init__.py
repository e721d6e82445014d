"""jobctl: a command-line client for the job engine."""
