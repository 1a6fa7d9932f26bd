"""The embedding service: namespaces of few-shot examples on Qdrant, and the embedders."""
