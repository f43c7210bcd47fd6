"""The engine side of serving: work items, the scheduler (queue, continuous batching), the model pool, the worker process."""
