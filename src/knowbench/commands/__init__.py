"""CLI command groups beyond run/validate/score; each module exposes `register(app)`."""
