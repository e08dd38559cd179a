"""zonegate."""
