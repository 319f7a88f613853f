"""``python -m epaudit``."""

from .launch import main

main()
