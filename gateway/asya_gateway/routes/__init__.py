"""Route handlers of the gateway, one module per area: tasks (create, view, list, cancel), events (SSE and producer
events), ops (health)."""
