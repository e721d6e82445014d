"""AI execution: the provider port, its adapters, the model router, prompts and the
AI job pipeline."""
