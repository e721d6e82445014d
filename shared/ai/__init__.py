"""The AI contract both services share: the provider port and its types (``provider``),
model tiers, and prompt templates (``prompts``). The providers and the model router are the
worker's (``worker_service.adapters``, ``worker_service.model_router``); the AI job toolkit
is the job types' (``jobtypes.aijob``)."""
