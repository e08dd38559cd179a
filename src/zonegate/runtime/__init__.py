"""What every layer may use: one clock (clock.py) and one supervisor of background tasks
(supervisor.py). Imports nothing of zonegate."""
