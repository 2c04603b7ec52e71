"""Small programs the builtin components run inside jobs (``python -m torchx.apps...``)."""
