"""AI execution: the provider port and its adapters, the model router, prompts, the AI job pipeline."""
