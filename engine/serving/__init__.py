"""Serving many requests with one model: the scheduler (a queue, or continuous batching), the worker that
owns the model for a whole server, the OpenAI-compatible HTTP server and the client that measures any server."""
