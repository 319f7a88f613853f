"""``python -m epaudit``."""

from .cli import main

main()
