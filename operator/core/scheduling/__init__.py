"""The scheduler: the queue, one pod's scheduling and binding cycle, the gang cycle, reporting."""
