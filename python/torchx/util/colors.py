"""Terminal colors for the CLI's output: ANSI escapes when stdout is a terminal, empty strings
otherwise (so piped output stays plain)."""

import sys

_TTY = not sys.stdout.closed and sys.stdout.isatty()

GREEN: str = "\033[32m" if _TTY else ""
BLUE: str = "\033[34m" if _TTY else ""
ORANGE: str = "\033[38:2:238:76:44m" if _TTY else ""
GRAY: str = "\033[2m" if _TTY else ""
ENDC: str = "\033[0m" if _TTY else ""
