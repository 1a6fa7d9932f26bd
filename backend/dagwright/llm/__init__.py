"""Model access: providers, the gateway every LLM block calls through, and the scripted model."""
