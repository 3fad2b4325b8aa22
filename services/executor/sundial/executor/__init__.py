"""The executor service: stateless workers that lease runs and call targets."""
